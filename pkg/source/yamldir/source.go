package yamldir

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// settle is how long a file must be quiet before it is read again: editors
// and `kubectl apply`-like tools write a file in several steps.
const settle = 30 * time.Millisecond

// Source watches Dir. Every problem found is reported (Report): a file
// that does not parse (its objects stay as they were), a document of a kind
// netcube does not read, an invalid object (it keeps its last valid
// version, unless it restricts access: then the restricted version
// applies), an object defined in two files (the one in the file first by
// name applies; when it goes, the next one does).
type Source struct {
	Dir    string
	Report *report.Reporter

	files map[string]map[objKey]object // what each file currently contributes
	// delivered: for each object handed to the handler, from which file.
	delivered map[objKey]delivered
	h         source.Handler
}

type delivered struct {
	file string
	obj  object
}

var _ source.Source = (*Source)(nil)

// Run delivers the directory's objects, then every change, until ctx ends.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	s.files, s.delivered, s.h = map[string]map[objKey]object{}, map[objKey]delivered{}, h

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(s.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", s.Dir, err)
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s.reload(filepath.Join(s.Dir, e.Name()))
	}
	h.OnSynced()
	if ph, ok := h.(source.PolicyHandler); ok {
		ph.OnPoliciesSynced()
	}
	if sh, ok := h.(source.SliceHandler); ok {
		sh.OnSlicesSynced()
	}
	if bh, ok := h.(source.BGPHandler); ok {
		bh.OnBGPPeeringsSynced()
	}

	pending := map[string]bool{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-w.Events:
			pending[ev.Name] = true
			timer.Reset(settle)
		case err := <-w.Errors:
			slog.Error("watching the manifest directory", "dir", s.Dir, "err", err)
		case <-timer.C:
			for f := range pending {
				s.reload(f)
			}
			clear(pending)
		}
	}
}

func manifest(path string) bool {
	base := filepath.Base(path)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// reload re-reads one file and delivers only the objects that changed.
func (s *Source) reload(path string) {
	if !manifest(path) {
		return
	}
	file := report.Object{Kind: "File", Name: path}
	old := s.files[path]
	next := map[objKey]object{}
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		// Removed: all its objects go, and its problems with them.
		s.Report.Clear(file, report.UnreadObject)
		for k := range old {
			s.Report.Clear(k.object(), report.InvalidField)
		}
	case err != nil:
		s.Report.Set(file, report.UnreadObject, fmt.Sprintf("%v (keeping its previous objects)", err))
		return
	default:
		p, err := parseFile(data)
		if err != nil {
			s.Report.Set(file, report.UnreadObject, fmt.Sprintf("%v (keeping its previous objects)", err))
			return
		}
		s.Report.Set(file, report.UnreadObject, strings.Join(p.unread, "; "))
		for k := range old {
			if _, ok := p.invalid[k]; !ok {
				s.Report.Clear(k.object(), report.InvalidField)
			}
		}
		for k := range p.objs {
			if _, ok := p.invalid[k]; !ok {
				s.Report.Clear(k.object(), report.InvalidField)
			}
		}
		for k, err := range p.invalid {
			what := "keeping its last valid version"
			if o, ok := p.objs[k]; ok && o.partial {
				what = "applied without the fields named"
			} else if ok {
				what = "applied with access restricted"
			} else if prev, ok := old[k]; ok {
				p.objs[k] = prev // an invalid edit keeps the last valid version
			} else {
				what = "not applied"
			}
			s.Report.Set(k.object(), report.InvalidField, fmt.Sprintf("%s: %v (%s)", path, err, what))
		}
		next = p.objs
	}
	if len(next) == 0 {
		delete(s.files, path)
	} else {
		s.files[path] = next
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			s.settle(k)
		}
	}
	for k := range next {
		s.settle(k)
	}
}

// settle delivers object k as the files now define it: the version of the
// first file (by name) that has it, or a deletion when none has; nothing
// when that is what was delivered already. Two files defining it are
// reported.
func (s *Source) settle(k objKey) {
	var files []string
	for f, objs := range s.files {
		if _, ok := objs[k]; ok {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	if len(files) > 1 {
		s.Report.Set(k.object(), report.DuplicateObject, fmt.Sprintf("defined in %s; the one in %s (first by file name) applies",
			strings.Join(files, " and "), files[0]))
	} else {
		s.Report.Clear(k.object(), report.DuplicateObject)
	}
	prev, had := s.delivered[k]
	if len(files) == 0 {
		if had {
			delete(s.delivered, k)
			s.deliver(k, object{})
		}
		return
	}
	want := delivered{files[0], s.files[files[0]][k]}
	if had && reflect.DeepEqual(prev.obj, want.obj) {
		s.delivered[k] = want
		return
	}
	s.delivered[k] = want
	s.deliver(k, want.obj)
}

func (s *Source) deliver(k objKey, o object) {
	switch k.kind {
	case "Service":
		s.h.OnService(k.NamespacedName, o.svc)
	case "EndpointSlice":
		s.h.OnEndpointSlice(k.NamespacedName, o.slice)
	case "Node":
		s.h.OnNode(k.Name, o.node)
	}
	if sh, ok := s.h.(source.SliceHandler); ok && k.kind == "NetworkSlice" {
		sh.OnSlice(k.Name, o.netSlice)
	}
	if bh, ok := s.h.(source.BGPHandler); ok && k.kind == "NetworkBGPPeering" {
		bh.OnBGPPeering(k.Name, o.peering)
	}
	ph, ok := s.h.(source.PolicyHandler)
	if !ok {
		return
	}
	switch k.kind {
	case "Pod":
		ph.OnPod(k.NamespacedName, o.pod)
	case "Namespace":
		ph.OnNamespace(k.Name, o.ns)
	case "NetworkPolicy":
		ph.OnPolicy(k.NamespacedName, o.policy)
	case "ClusterNetworkPolicy":
		if ch, ok := ph.(source.ClusterPolicyHandler); ok {
			ch.OnClusterPolicy(k.Name, o.cnp)
		}
	}
}
