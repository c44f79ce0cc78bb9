// Package cgroup finds the cgroup v2 hierarchy and creates or removes the
// cgroups netcube owns (the sandbox's node and pod cgroups, test cgroups).
// It never touches a cgroup it did not create.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root returns the mount point of the cgroup v2 hierarchy (/sys/fs/cgroup on
// a unified host, /sys/fs/cgroup/unified on a hybrid one).
func Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "... mountpoint options - fstype source superoptions"
		fields := strings.Fields(s.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)")
}

// Create makes the cgroup at path (and its parents).
func Create(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", path, err)
	}
	return nil
}

// Remove deletes the cgroup at path and every cgroup below it, after moving
// any process left in them to the root cgroup (a cgroup with processes
// cannot be removed).
func Remove(root, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if procs, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(procs)) {
				_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0)
			}
		}
		var err error
		for range 50 { // rmdir fails with EBUSY while exiting tasks are released
			if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// Procs lists the processes in the cgroup tree at root (any hierarchy).
func Procs(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
