// Package repocheck holds tests over the repository as a whole: that it
// stands on its own (every file and link it names is in it) and that its
// comments say what the code does, not how it came to be written.
package repocheck
