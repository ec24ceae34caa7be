namespace attnprof { }
