// Package logs holds helpers for the log files netcube's own processes
// write (agents, pods, etcd, kube-apiserver).
package logs

import (
	"os"
	"strings"
)

// Tail returns the last n lines of a file, for error messages that say why
// a process died.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
