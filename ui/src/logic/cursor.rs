//! Paging through the audit log. The backend only hands out the cursor of the next, older page,
//! so going back to newer pages means remembering the cursors we came through: a stack.

/// Where the audit table is, and how it got there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CursorStack {
    /// The cursors of the newer pages, the newest (`None`: the first page) at the bottom.
    back: Vec<Option<i64>>,
    /// The cursor the current page was queried with.
    current: Option<i64>,
}

impl CursorStack {
    /// The cursor to query the current page with (`None` for the newest page).
    pub(crate) fn current(&self) -> Option<i64> {
        self.current
    }

    /// Moves to the older page that starts below `next_cursor` (the current page's `nextCursor`).
    pub(crate) fn older(&mut self, next_cursor: i64) {
        self.back.push(self.current);
        self.current = Some(next_cursor);
    }

    /// Moves back to the newer page; false (and no move) on the first page.
    pub(crate) fn newer(&mut self) -> bool {
        match self.back.pop() {
            Some(cursor) => {
                self.current = cursor;
                true
            }
            None => false,
        }
    }

    /// Whether there is a newer page to go back to.
    pub(crate) fn has_newer(&self) -> bool {
        !self.back.is_empty()
    }

    /// The current page's number, 1 for the newest.
    pub(crate) fn page_number(&self) -> usize {
        self.back.len() + 1
    }

    /// Back to the newest page, forgetting the way (new filters start over).
    pub(crate) fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn older_then_newer_retraces_the_cursors() {
        let mut c = CursorStack::default();
        let mut seen = vec![(c.current(), c.page_number(), c.has_newer())];
        c.older(500);
        seen.push((c.current(), c.page_number(), c.has_newer()));
        c.older(450);
        seen.push((c.current(), c.page_number(), c.has_newer()));
        assert!(c.newer());
        seen.push((c.current(), c.page_number(), c.has_newer()));
        assert!(c.newer());
        seen.push((c.current(), c.page_number(), c.has_newer()));
        assert!(!c.newer());
        seen.push((c.current(), c.page_number(), c.has_newer()));
        assert_eq!(
            seen,
            vec![
                (None, 1, false),
                (Some(500), 2, true),
                (Some(450), 3, true),
                (Some(500), 2, true),
                (None, 1, false),
                (None, 1, false),
            ]
        );
    }

    #[test]
    fn reset_goes_to_the_newest_page() {
        let mut c = CursorStack::default();
        c.older(9);
        c.older(3);
        c.reset();
        assert_eq!(c, CursorStack::default());
    }
}
