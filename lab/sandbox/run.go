package sandbox

import (
	"fmt"
	"os/exec"
	"strings"
)

// run executes a command, returning its output in the error if it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip runs `ip -n netns args...` (setns only: no mount namespace games).
func ip(netns string, args ...string) error {
	if netns == "" {
		return run("ip", args...)
	}
	return run("ip", append([]string{"-n", netns}, args...)...)
}

// sysctl sets kernel parameters inside a network namespace.
func sysctl(netns string, settings ...string) error {
	return run("nsenter", append([]string{"--net=/run/netns/" + netns, "--", "sysctl", "-q", "-w"}, settings...)...)
}

// steps runs fns in order and stops at the first error.
func steps(fns ...func() error) error {
	for _, f := range fns {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// outputIn runs a command in a network namespace and returns its output.
func outputIn(netns, name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns, name}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}
