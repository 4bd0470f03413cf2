// Package repocheck holds tests over the repository as a whole: that it
// stands on its own (every file and link it names is in it), that its
// comments say what the code does, not how it came to be written, and that
// every name of the shared contract (the schema package) is read from there:
// no Go file spells one as a literal, and the generated rules and dashboards
// name only schema metrics.
package repocheck
