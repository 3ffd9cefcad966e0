a &&
 b