// Package doccheck keeps the documentation honest: its tests compile every
// Go snippet of README.md and docs/*.md against the module as it is, and run
// every cheap shell command those files show (comparing the output a
// console block shows with the real one). It has no code of its own; the
// checks run with the module's tests (make test).
//
// # Go snippets
//
// Every ```go block is compiled, each as a package of its own, in a
// throwaway module of a Go workspace made of the repository's modules, so
// that it builds with the module's own dependencies and nothing else. A
// block is one of:
//
//   - a whole file, when it has a package clause;
//   - declarations (func, type, var, const), compiled as a file;
//   - otherwise a fragment: statements, compiled as the body of a function.
//
// The imports are added from the package names the block uses (admit,
// admitatomic, sharded, http, …: the table packages in snippets_test.go). A
// fragment may use the names a reader takes as given, such as userID, w or
// svc, without declaring them: the table givens says their types. Variables
// a fragment declares and does not use are not an error.
//
// A block that cannot compile (a sketch of unexported internals, pseudo-code)
// is excluded with a marker on the line before its fence, which must give a
// reason:
//
//	<!-- doccheck: skip: a sketch of Service.check's lookups, not code a user writes -->
//
// # Shell commands
//
// The commands are the `$ ` lines of ```console blocks, the lines of ```sh
// blocks, the lines of indented code blocks and the inline code spans that
// start with a command (go, make, cd, apt-get, printf). Each matches one of
// the rules of commands_test.go, which either runs it or says why it is not
// run (it runs make test itself, takes minutes, installs packages, …); a
// command no rule matches fails the test. `go run ./cmd/admit` runs a binary
// built once. A command that names a file a document defines (a
// ```properties block whose first line is a comment naming the file, as
// "# rules.conf: …") runs in a directory holding those files and the
// repository's own. When a console block shows a command's output, the real
// output must match it, a line "…" standing for any number of lines.
package doccheck
