ls \
 -la