// Package hostdeps checks that every file of this machine the project
// uses comes from a package hack/install-deps.sh installs: the programs its
// code and tests run, and the files its test images copy (with their
// shared libraries). A Debian machine with nothing but Go then runs
// `make test` as it runs here: a program installed by hand, and named by
// no file of the project, fails this test rather than a fresh machine.
package hostdeps
