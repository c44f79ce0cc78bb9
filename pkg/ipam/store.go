// Package ipam hands out pod addresses from a node's pod CIDRs and remembers
// who has them. The state is one JSON file in a directory, rewritten
// atomically (temporary file, rename) under an exclusive file lock,
// so concurrent CNI ADDs in separate processes never hand out one address
// twice, and an agent or plugin restart (or a crash mid-write) loses
// nothing. It knows nothing of interfaces or the kernel: the CNI plugin
// (pkg/cni) calls it.
package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Attachment names what holds addresses: a container's interface, as the
// runtime names it in CNI calls (CNI_CONTAINERID, CNI_IFNAME).
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

func (a Attachment) String() string { return a.ContainerID + "/" + a.IfName }

// Allocation is the addresses one attachment holds, one per range.
type Allocation struct {
	Attachment
	Addrs []netip.Addr `json:"addrs"`
}

// state is the file's content.
type state struct {
	Allocations []Allocation `json:"allocations"`
	// Last is the last address handed out per range: the next search
	// starts after it, so a released address is not reused at once (a
	// late packet for a deleted pod does not reach its successor).
	Last map[string]netip.Addr `json:"last,omitempty"`
}

// Store is the allocation state in one directory. Its methods may be called
// from many processes at once.
type Store struct {
	dir string
}

const (
	stateFile = "allocations.json"
	lockFile  = "lock"
)

// Open returns the store in dir, creating the directory if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ipam: %w", err)
	}
	return &Store{dir: dir}, nil
}

// ErrAlreadyAllocated: the attachment holds addresses already (a second
// ADD for the same container interface).
var ErrAlreadyAllocated = errors.New("already has addresses")

// RangeFullError: a range has no free address.
type RangeFullError struct {
	Range netip.Prefix
	InUse int
}

func (e *RangeFullError) Error() string {
	return fmt.Sprintf("pod CIDR %s has no free address (%d in use)", e.Range, e.InUse)
}

// Allocate gives one address from each range (a pod CIDR per family), all
// or nothing: when one range is full nothing is taken from the others.
func (s *Store) Allocate(a Attachment, ranges []netip.Prefix) ([]netip.Addr, error) {
	if len(ranges) == 0 {
		return nil, errors.New("ipam: no pod CIDR to allocate from")
	}
	var out []netip.Addr
	err := s.update(func(st *state) (bool, error) {
		if i := st.find(a); i >= 0 {
			return false, fmt.Errorf("ipam: %s %w: %v", a, ErrAlreadyAllocated, st.Allocations[i].Addrs)
		}
		used := st.used()
		for _, r := range ranges {
			addr, err := st.next(r.Masked(), used)
			if err != nil {
				return false, err
			}
			used[addr] = true
			out = append(out, addr)
		}
		for i, r := range ranges {
			st.Last[r.Masked().String()] = out[i]
		}
		st.Allocations = append(st.Allocations, Allocation{Attachment: a, Addrs: out})
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Release frees what a holds and returns it; releasing what holds
// nothing is not an error (CNI DEL is idempotent).
func (s *Store) Release(a Attachment) ([]netip.Addr, error) {
	var freed []netip.Addr
	err := s.update(func(st *state) (bool, error) {
		i := st.find(a)
		if i < 0 {
			return false, nil
		}
		freed = st.Allocations[i].Addrs
		st.Allocations = slices.Delete(st.Allocations, i, i+1)
		return true, nil
	})
	return freed, err
}

// Get returns what a holds (nil: nothing).
func (s *Store) Get(a Attachment) ([]netip.Addr, error) {
	all, err := s.List()
	for _, al := range all {
		if al.Attachment == a {
			return al.Addrs, err
		}
	}
	return nil, err
}

// List returns every allocation.
func (s *Store) List() ([]Allocation, error) {
	var out []Allocation
	err := s.update(func(st *state) (bool, error) {
		out = st.Allocations
		return false, nil
	})
	return out, err
}

// GC releases every allocation whose attachment is not in keep (CNI GC's
// valid attachments) and returns what it released.
func (s *Store) GC(keep []Attachment) ([]Allocation, error) {
	var released []Allocation
	err := s.update(func(st *state) (bool, error) {
		kept := st.Allocations[:0]
		for _, al := range st.Allocations {
			if slices.Contains(keep, al.Attachment) {
				kept = append(kept, al)
			} else {
				released = append(released, al)
			}
		}
		st.Allocations = kept
		return len(released) > 0, nil
	})
	return released, err
}

// update runs f on the state under the lock and writes the state back if
// f says it changed it.
func (s *Store) update(f func(*state) (bool, error)) error {
	lock, err := os.OpenFile(filepath.Join(s.dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("ipam: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("ipam: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too

	st, err := s.read()
	if err != nil {
		return err
	}
	changed, err := f(st)
	if err != nil || !changed {
		return err
	}
	return s.write(st)
}

func (s *Store) read() (*state, error) {
	st := &state{Last: map[string]netip.Addr{}}
	b, err := os.ReadFile(filepath.Join(s.dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ipam: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		// Never start afresh over a damaged file: that would hand out
		// addresses pods still hold.
		return nil, fmt.Errorf("ipam: %s is damaged (%v): fix or remove it by hand", filepath.Join(s.dir, stateFile), err)
	}
	if st.Last == nil {
		st.Last = map[string]netip.Addr{}
	}
	return st, nil
}

// write replaces the state file atomically (rename): a process that dies
// mid-write leaves the old file or the new one, never a mix. It does not
// fsync: that would cost a pod's start about 7 ms here, and it would only
// matter after a machine crash, which ends every pod holding an address
// anyway (their namespaces are gone; the runtime's GC releases what the
// file still lists); host-local does not either.
func (s *Store) write(st *state) error {
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("ipam: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, stateFile+".tmp*")
	if err != nil {
		return fmt.Errorf("ipam: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, stateFile))
	}
	if err != nil {
		return fmt.Errorf("ipam: write state: %w", err)
	}
	return nil
}

func (st *state) find(a Attachment) int {
	return slices.IndexFunc(st.Allocations, func(al Allocation) bool { return al.Attachment == a })
}

func (st *state) used() map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	for _, al := range st.Allocations {
		for _, a := range al.Addrs {
			used[a] = true
		}
	}
	return used
}

// next finds the first free address of r after the last one handed out,
// wrapping once. The network address (and IPv4's broadcast address) are
// never handed out.
func (st *state) next(r netip.Prefix, used map[netip.Addr]bool) (netip.Addr, error) {
	first := r.Addr().Next()
	start := first
	if last, ok := st.Last[r.String()]; ok && r.Contains(last) {
		start = last.Next()
	}
	usable := func(a netip.Addr) bool {
		return a.IsValid() && r.Contains(a) && !(a.Is4() && isBroadcast(r, a))
	}
	if !usable(first) {
		return netip.Addr{}, fmt.Errorf("ipam: pod CIDR %s is too small to hold a pod", r)
	}
	if !usable(start) {
		start = first
	}
	for a := start; ; {
		if !used[a] {
			return a, nil
		}
		a = a.Next()
		if !usable(a) {
			a = first
		}
		if a == start {
			inUse := 0
			for u := range used {
				if r.Contains(u) {
					inUse++
				}
			}
			return netip.Addr{}, &RangeFullError{Range: r, InUse: inUse}
		}
	}
}

// isBroadcast: a is r's last address.
func isBroadcast(r netip.Prefix, a netip.Addr) bool {
	n := a.Next()
	return !n.IsValid() || !r.Contains(n)
}
