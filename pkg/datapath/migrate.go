package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/pkg/cube"
)

// A carryOver moves the entries of a pinned map whose size or value
// layout differs from this agent's into the new map: the old map is read
// whole and unpinned (kept alive by its fd, and by the programs still
// attached, which go on using it) before the object is loaded, and its
// entries, upgraded, are written to the new map after. The entries the old
// programs write in between (new flows during the agent's start) are
// copied once the new programs have replaced them everywhere
// (CatchUpCarryOver). A map that restarts (cube.MapSpec.Restart) is only
// unpinned: its replacement starts empty.
type carryOver struct {
	name, path   string
	old          *ebpf.Map
	upgrade      func([]byte) ([]byte, bool)
	keys, values [][]byte
	dropped      int // values Upgrade refused
}

// takeOver prepares a carry-over for each pinned map of spec that a cube
// can upgrade (cube.MapSpec.Upgrade) and that the object could not reuse
// as it is (its size, value layout, or kind of hash map changed). A map
// whose key layout or type otherwise changed is left alone: the load then
// fails, naming it.
func takeOver(spec *ebpf.CollectionSpec, cfg Config) ([]*carryOver, error) {
	if cfg.PinDir == "" {
		return nil, nil
	}
	var out []*carryOver
	for _, c := range cfg.Cubes {
		for _, m := range c.Maps() {
			if m.Upgrade == nil && !m.Restart {
				continue
			}
			co, err := takeOverMap(spec.Maps[m.Name], filepath.Join(cfg.PinDir, m.Name), m)
			if err != nil {
				giveBack(out)
				return nil, err
			}
			if co != nil {
				out = append(out, co)
			}
		}
	}
	return out, nil
}

// sameKind says whether a pinned map of type old can be carried over into
// one of type now: the same type, or a hash map of either kind (conntrack
// was an LRU hash before it was a plain one, bpf/cubes/ct/ct_maps.h).
func sameKind(old, now ebpf.MapType) bool {
	hash := func(t ebpf.MapType) bool { return t == ebpf.Hash || t == ebpf.LRUHash }
	return old == now || (hash(old) && hash(now))
}

func takeOverMap(ms *ebpf.MapSpec, path string, m cube.MapSpec) (*carryOver, error) {
	old, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("open pinned map %s: %w", m.Name, err)
	}
	if ms.Compatible(old) == nil || !sameKind(old.Type(), ms.Type) || old.KeySize() != ms.KeySize {
		old.Close()
		return nil, nil
	}
	co := &carryOver{name: m.Name, path: path, old: old, upgrade: m.Upgrade}
	if m.Upgrade == nil { // Restart: nothing to carry
		if err := old.Unpin(); err != nil {
			old.Close()
			return nil, fmt.Errorf("unpin %s: %w", m.Name, err)
		}
		return co, nil
	}
	key, value := make([]byte, old.KeySize()), make([]byte, old.ValueSize())
	it := old.Iterate()
	for it.Next(&key, &value) {
		v, ok := m.Upgrade(value)
		if !ok {
			co.dropped++
			continue
		}
		co.keys = append(co.keys, append([]byte(nil), key...))
		co.values = append(co.values, v)
	}
	if err := it.Err(); err != nil {
		old.Close()
		return nil, fmt.Errorf("read pinned map %s: %w", m.Name, err)
	}
	if err := old.Unpin(); err != nil {
		old.Close()
		return nil, fmt.Errorf("unpin %s: %w", m.Name, err)
	}
	return co, nil
}

// giveBack pins the old maps again (the load failed: the node keeps what
// it had).
func giveBack(cos []*carryOver) {
	for _, co := range cos {
		if err := co.old.Pin(co.path); err != nil {
			slog.Error("pin back an old map", "map", co.name, "err", err)
		}
		co.old.Close()
	}
}

// finish writes the carried entries to the new maps (the old ones stay
// open for CatchUpCarryOver).
func finish(cos []*carryOver, maps map[string]*kernelMap) {
	for _, co := range cos {
		if co.upgrade == nil {
			slog.Info("map replaced: an earlier layout or size, its counts start again", "map", co.name,
				"old_value_size", co.old.ValueSize(), "old_size", co.old.MaxEntries())
			continue
		}
		written, failed := 0, 0
		for i := range co.keys {
			if err := maps[co.name].Map.Update(co.keys[i], co.values[i], ebpf.UpdateAny); err != nil {
				failed++
				continue
			}
			written++
		}
		slog.Info("map carried over from an earlier layout or size", "map", co.name,
			"old_value_size", co.old.ValueSize(), "old_size", co.old.MaxEntries(),
			"entries", written, "not_written", failed, "not_upgradable", co.dropped)
		co.keys, co.values = nil, nil
	}
}

// CatchUpCarryOver copies into the new maps the entries the earlier
// agent's programs wrote to the old ones while this agent started (new
// flows), and lets the old maps go. The agent calls it once this object's
// programs are attached everywhere the old ones were: nothing writes the
// old maps any more.
func (d *Datapath) CatchUpCarryOver() {
	for _, co := range d.carried {
		if co.upgrade == nil {
			co.old.Close()
			continue
		}
		late := 0
		key, value := make([]byte, co.old.KeySize()), make([]byte, co.old.ValueSize())
		for it := co.old.Iterate(); it.Next(&key, &value); {
			v, ok := co.upgrade(value)
			if ok && d.maps[co.name].Map.Update(key, v, ebpf.UpdateNoExist) == nil {
				late++
			}
		}
		slog.Info("map carried over: entries written meanwhile", "map", co.name, "entries", late)
		co.old.Close()
	}
	d.carried = nil
}
