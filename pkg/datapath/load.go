package datapath

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/pkg/cube"
)

// Datapath is the loaded BPF object: programs and (pinned) maps.
type Datapath struct {
	objs   bpfObjects
	pinDir string
	maps   map[string]*kernelMap
	flags  map[string]string // size flag by map name
	// carried are the earlier agent's maps this one took over (until
	// CatchUpCarryOver).
	carried []*carryOver
	// later loads the programs only some nodes need (ondemand.go).
	later *later
}

// Load loads the BPF object. With cfg.PinDir set, maps are pinned there and
// maps already pinned (by an earlier agent) are reused, so the state of
// established flows survives a restart. Without it (tests), maps are private.
// The maps of cfg.Cubes are sized as they declare (or as cfg.MapSizes says).
func Load(cfg Config) (*Datapath, error) {
	spec, err := loadBpf()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	flags, err := sizeMaps(spec, cfg)
	if err != nil {
		return nil, err
	}
	for name, v := range cfg.Variables {
		vs, ok := spec.Variables[name]
		if !ok || !vs.Constant() {
			return nil, fmt.Errorf("the BPF object has no constant %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
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

	carried, err := takeOver(spec, cfg)
	if err != nil {
		return nil, err
	}
	d := &Datapath{pinDir: cfg.PinDir, flags: flags}
	if d.later, err = loadObjects(spec, opts, &d.objs); err != nil {
		giveBack(carried)
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
	d.maps = map[string]*kernelMap{}
	for name, m := range d.objs.bpfMaps.byName() {
		km := &kernelMap{Map: m, name: name}
		if inner := spec.Maps[name].InnerMap; inner != nil {
			km.inner = inner.Copy()
		}
		d.maps[name] = km
	}
	finish(carried, d.maps)
	d.carried = carried
	unpinRetired(cfg.PinDir)
	return d, nil
}

// retiredMaps are maps an earlier agent pinned that this one no longer
// has: their pins are removed once this agent's object is loaded (the
// old programs, until replaced, keep the maps alive by their own
// references).
var retiredMaps = []string{
	"pol_flows", // the policy cube's connection records, now conntrack's CT_POLICY entries
}

func unpinRetired(dir string) {
	if dir == "" {
		return
	}
	for _, name := range retiredMaps {
		if err := os.Remove(filepath.Join(dir, name)); err == nil {
			slog.Info("removed the pin of a map this agent no longer uses", "map", name)
		} else if !errors.Is(err, os.ErrNotExist) {
			slog.Warn("removing the pin of a retired map", "map", name, "err", err)
		}
	}
}

// sizeMaps applies the cubes' declared sizes (or cfg.MapSizes) to the
// object's maps, and returns each map's size flag. A cube declaring a map
// the object lacks, or one another cube declares, is refused.
func sizeMaps(spec *ebpf.CollectionSpec, cfg Config) (map[string]string, error) {
	flags := map[string]string{}
	owner := map[string]string{}
	for _, c := range cfg.Cubes {
		for _, m := range c.Maps() {
			ms, ok := spec.Maps[m.Name]
			if !ok {
				return nil, fmt.Errorf("cube %s declares map %s, which the BPF object does not define", c.Name(), m.Name)
			}
			if o, dup := owner[m.Name]; dup {
				return nil, fmt.Errorf("map %s is declared by cube %s and by cube %s", m.Name, o, c.Name())
			}
			owner[m.Name], flags[m.Name] = c.Name(), m.SizeFlag
			if m.DefaultSize != 0 {
				ms.MaxEntries = m.DefaultSize
			}
		}
	}
	for name, size := range cfg.MapSizes {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("map size given for %s, which the BPF object does not define", name)
		}
		if size != 0 {
			ms.MaxEntries = size
		}
	}
	return flags, nil
}

// Close releases this process's handles. Pinned maps and links stay: the
// datapath keeps forwarding without the agent.
func (d *Datapath) Close() error {
	for _, co := range d.carried {
		co.old.Close()
	}
	d.later.Close()
	return d.objs.Close()
}

// Maps returns every map of the object (tests, inspection).
func (d *Datapath) Maps() *cube.Maps {
	all := make([]cube.Map, 0, len(d.maps))
	for _, m := range d.maps {
		all = append(all, m)
	}
	return cube.NewMaps(all, d.flags)
}

// MapsOf returns the maps c declares: what the cube is given at Start.
func (d *Datapath) MapsOf(c cube.Cube) *cube.Maps {
	var own []cube.Map
	for _, m := range c.Maps() {
		if km, ok := d.maps[m.Name]; ok {
			own = append(own, km)
		}
	}
	return cube.NewMaps(own, d.flags)
}

// Program returns the program of the object named name (its C function),
// or nil.
func (d *Datapath) Program(name string) *ebpf.Program { return d.objs.bpfPrograms.byName()[name] }

// Programs exposes the programs, for tests that run them with BPF_PROG_RUN.
func (d *Datapath) Programs() Programs {
	p := d.objs.bpfPrograms
	return Programs{
		FromPod: p.FromPod, ToPod: p.ToPod, FromNet: p.FromNet, ToNet: p.ToNet, XDPFromNet: p.XdpFromNet,
		FromPodNetkit: p.FromPodNetkit, ToPodNetkit: p.ToPodNetkit,
		Connect4: p.SockConnect4, Connect6: p.SockConnect6,
		Sendmsg4: p.SockSendmsg4, Sendmsg6: p.SockSendmsg6,
		Recvmsg4: p.SockRecvmsg4, Recvmsg6: p.SockRecvmsg6,
		Getpeername4: p.SockGetpeername4, Getpeername6: p.SockGetpeername6,
	}
}

// Programs are the entry programs of the object.
type Programs struct {
	FromPod, ToPod, FromNet, ToNet                 *ebpf.Program
	XDPFromNet                                     *ebpf.Program
	FromPodNetkit, ToPodNetkit                     *ebpf.Program // a netkit pod's (peer, primary)
	Connect4, Connect6, Sendmsg4, Sendmsg6         *ebpf.Program
	Recvmsg4, Recvmsg6, Getpeername4, Getpeername6 *ebpf.Program
}

// Unpin detaches every program linked under dir (before it returns, so the
// next data plane starts on a clean node) and removes every pin: maps and
// links. Used by `netcube-agent --cleanup` and `netcube-lab sandbox down`.
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
func OpenPinned(dir string) (*cube.Maps, func(), error) { return openPinned(dir, true) }

// OpenPinnedForWriting opens them writable: for a benchmark that stands in
// for an agent's source (the agent must not be writing the same maps).
func OpenPinnedForWriting(dir string) (*cube.Maps, func(), error) { return openPinned(dir, false) }

// PinLayoutError: a pinned map's entries are not this build's (an agent
// of another version pinned it): reading it would misread every entry.
type PinLayoutError struct {
	Map                            string
	Key, Value, WantKey, WantValue uint32
}

func (e *PinLayoutError) Error() string {
	return fmt.Sprintf("pinned map %s has %d-byte keys and %d-byte values, this build's %d and %d", e.Map, e.Key, e.Value, e.WantKey, e.WantValue)
}

func openPinned(dir string, readOnly bool) (*cube.Maps, func(), error) {
	spec, err := loadBpf()
	if err != nil {
		return nil, nil, fmt.Errorf("parse BPF object: %w", err)
	}
	var maps []cube.Map
	closeAll := func() {
		for _, m := range maps {
			m.(*kernelMap).Close()
		}
	}
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), &ebpf.LoadPinOptions{ReadOnly: readOnly})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		if ms.KeySize != 0 && ms.ValueSize != 0 && (mp.KeySize() != ms.KeySize || mp.ValueSize() != ms.ValueSize) {
			err := &PinLayoutError{Map: name, Key: mp.KeySize(), Value: mp.ValueSize(), WantKey: ms.KeySize, WantValue: ms.ValueSize}
			mp.Close()
			closeAll()
			return nil, nil, err
		}
		maps = append(maps, &kernelMap{Map: mp, name: name})
	}
	return cube.NewMaps(maps, nil), closeAll, nil
}

// Spec returns the BPF object as compiled (maps unsized and unloaded):
// its maps' layouts, for tests that stand in for the kernel.
func Spec() (*ebpf.CollectionSpec, error) { return loadBpf() }
