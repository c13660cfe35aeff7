# Contract: `cmake -DSRC=<dir> -DDST=<dir> -P copy_python_sources.cmake` copies
# the .py files under SRC into DST, keeping the tree. Only sources: a stray
# extension built in the source tree must not replace the one in DST.
file(COPY ${SRC}/ DESTINATION ${DST} FILES_MATCHING PATTERN "*.py")
