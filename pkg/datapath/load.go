package datapath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Datapath is the loaded BPF object: programs and (pinned) maps.
type Datapath struct {
	objs        bpfObjects
	pinDir      string
	sizes       map[string]uint32
	maglevInner *ebpf.MapSpec
}

// Load loads the BPF object. With cfg.PinDir set, maps are pinned there and
// maps already pinned (by an earlier agent) are reused, so the state of
// established flows survives a restart. Without it (tests), maps are private.
func Load(cfg Config) (*Datapath, error) {
	spec, err := loadBpf()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	sizes := map[string]uint32{}
	for name, ms := range spec.Maps {
		size, ok := cfg.MapSizes[name]
		if !ok || size == 0 {
			size = DefaultMapSizes[name]
		}
		if size != 0 {
			ms.MaxEntries = size
		}
		sizes[name] = ms.MaxEntries
	}

	opts := &ebpf.CollectionOptions{}
	if cfg.PinDir != "" {
		if err := os.MkdirAll(filepath.Join(cfg.PinDir, "links"), 0o700); err != nil {
			return nil, fmt.Errorf("create pin directory: %w (is bpffs mounted at /sys/fs/bpf?)", err)
		}
		opts.Maps.PinPath = cfg.PinDir
	} else {
		for _, ms := range spec.Maps {
			ms.Pinning = ebpf.PinNone
		}
	}

	inner := spec.Maps[MapMaglev].InnerMap
	if inner == nil || inner.MaxEntries != MaglevTableSize {
		return nil, fmt.Errorf("BPF object: %s tables are not of %d entries", MapMaglev, MaglevTableSize)
	}
	d := &Datapath{pinDir: cfg.PinDir, sizes: sizes, maglevInner: inner.Copy()}
	if err := spec.LoadAndAssign(&d.objs, opts); err != nil {
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("%w: a map pinned under %s has another size or layout than this agent's; "+
				"restore the old size flags, or remove the pins with `netcube-agent --cleanup` (drops established flows)",
				err, cfg.PinDir)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF programs: %+v", ve)
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	return d, nil
}

// Close releases this process's handles. Pinned maps and links stay: the
// datapath keeps forwarding without the agent.
func (d *Datapath) Close() error { return d.objs.Close() }

// Maps exposes the maps to the cubes that own their contents.
func (d *Datapath) Maps() *Maps {
	o := d.objs.bpfMaps
	return &Maps{sizes: d.sizes, maglevInner: d.maglevInner, byName: map[string]*ebpf.Map{
		MapServices: o.LbServices, MapBackends: o.LbBackends, MapRevNAT: o.LbRevnat,
		MapCT: o.CtFlows, MapSockRevNAT: o.SockRevnat, MapSockUDP: o.SockUdpBackend,
		MapNodeAddrs: o.NodeAddrs, MapAffinity: o.LbAffinity, MapAffinityMatch: o.LbAffinityMatch,
		MapMaglev: o.LbMaglev, MapSourceRanges: o.LbSourceRanges, MapNodeConfig: o.NodeConfig,
	}}
}

// Programs exposes the programs, for tests that run them with BPF_PROG_RUN.
func (d *Datapath) Programs() Programs {
	p := d.objs.bpfPrograms
	return Programs{
		FromPod: p.FromPod, ToPod: p.ToPod, FromNet: p.FromNet,
		Connect4: p.SockConnect4, Connect6: p.SockConnect6,
		Sendmsg4: p.SockSendmsg4, Sendmsg6: p.SockSendmsg6,
		Recvmsg4: p.SockRecvmsg4, Recvmsg6: p.SockRecvmsg6,
		Getpeername4: p.SockGetpeername4, Getpeername6: p.SockGetpeername6,
	}
}

// Programs are the entry programs of the object.
type Programs struct {
	FromPod, ToPod, FromNet                        *ebpf.Program
	Connect4, Connect6, Sendmsg4, Sendmsg6         *ebpf.Program
	Recvmsg4, Recvmsg6, Getpeername4, Getpeername6 *ebpf.Program
}

// Map names, as in bpf/lib/*.h. Each map is written by exactly one cube.
const (
	MapServices   = "lb_services"      // lb cube (agent)
	MapBackends   = "lb_backends"      // lb cube (agent)
	MapRevNAT     = "lb_revnat"        // lb cube (agent)
	MapCT         = "ct_flows"         // conntrack (datapath)
	MapSockRevNAT = "sock_revnat"      // socket-LB (datapath)
	MapSockUDP    = "sock_udp_backend" // socket-LB (datapath)
	MapNodeAddrs  = "node_addrs"       // node cube (agent)
	MapNodeConfig = "node_config"      // node cube (agent): netns, NodePort range
	// Session affinity: the choices (datapath), the backends each Service
	// with affinity still has (lb cube, agent).
	MapAffinity      = "lb_affinity"
	MapAffinityMatch = "lb_affinity_match"
	MapMaglev        = "lb_maglev"        // lb cube (agent): Maglev tables by revNAT id
	MapSourceRanges  = "lb_source_ranges" // lb cube (agent): loadBalancerSourceRanges
)

// Maps are the datapath's maps, by name.
type Maps struct {
	byName map[string]*ebpf.Map
	sizes  map[string]uint32
	// maglevInner is the layout of a Maglev table (lb_maglev's values).
	maglevInner *ebpf.MapSpec
	// Observe, if set, is told about every update and delete (metrics).
	Observe func(mapName, op string, err error)
}

// Map returns the named map.
func (m *Maps) Map(name string) *ebpf.Map { return m.byName[name] }

// Size returns the configured number of entries of a map.
func (m *Maps) Size(name string) uint32 { return m.sizes[name] }

// Update writes key=value into the named map, turning "map full" into a
// MapFullError that names the size flag.
func (m *Maps) Update(name string, key, value any) error {
	err := m.classify(name, m.byName[name].Update(key, value, ebpf.UpdateAny))
	if m.Observe != nil {
		m.Observe(name, "update", err)
	}
	return err
}

// classify turns a failed update's "map full" into a MapFullError that names
// the size flag, and says which map any other failure came from.
func (m *Maps) classify(name string, err error) error {
	switch {
	case errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC):
		return &MapFullError{Map: name, Size: m.sizes[name], Err: err}
	case err != nil:
		return fmt.Errorf("update map %s: %w", name, err)
	}
	return nil
}

// Delete removes key from the named map; a missing key is not an error.
func (m *Maps) Delete(name string, key any) error {
	err := m.byName[name].Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	if m.Observe != nil {
		m.Observe(name, "delete", err)
	}
	if err != nil {
		return fmt.Errorf("delete from map %s: %w", name, err)
	}
	return nil
}

// Unpin detaches every program linked under dir (before it returns, so the
// next data plane starts on a clean node) and removes every pin: maps and
// links. Used by `netcube-agent --cleanup` and `netcube sandbox down`.
func Unpin(dir string) error {
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Base(filepath.Dir(path)) != "links" {
			return err
		}
		return detachPinned(path)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.RemoveAll(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove pins under %s: %w", dir, err)
	}
	return nil
}

// OpenPinned opens the maps pinned under dir by a running agent, for
// inspection (tests, CLI). The caller must not write to them.
func OpenPinned(dir string) (*Maps, func(), error) {
	m := &Maps{byName: map[string]*ebpf.Map{}, sizes: map[string]uint32{}}
	closeAll := func() {
		for _, mp := range m.byName {
			mp.Close()
		}
	}
	for name := range MapSizeFlags {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		m.byName[name], m.sizes[name] = mp, mp.MaxEntries()
	}
	return m, closeAll, nil
}
