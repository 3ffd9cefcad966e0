-- What a held call would touch, as the tool saw it when it asked (for a browser action: the
-- page's address and the element's role and accessible name), so the person answering sees
-- more than the arguments: a JSON object, or NULL when the tool has nothing to add.
ALTER TABLE confirmations ADD COLUMN context TEXT;
