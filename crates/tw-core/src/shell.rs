//! Shell command lines taken apart into the simple commands they would run (work in progress).
