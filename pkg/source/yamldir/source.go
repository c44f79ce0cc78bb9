package yamldir

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// settle is how long a file must be quiet before it is read again: editors
// and `kubectl apply`-like tools write a file in several steps.
const settle = 30 * time.Millisecond

// Source watches Dir.
type Source struct {
	Dir string
	// OnError receives every problem found in a file (default: logged).
	OnError func(error)

	files map[string]map[objKey]object // what each file currently contributes
	h     source.Handler
}

var _ source.Source = (*Source)(nil)

// Run delivers the directory's objects, then every change, until ctx ends.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	if s.OnError == nil {
		s.OnError = func(err error) { slog.Error("manifest rejected", "err", err) }
	}
	s.files, s.h = map[string]map[objKey]object{}, h

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
			s.OnError(fmt.Errorf("watching %s: %w", s.Dir, err))
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
	old := s.files[path]
	next := map[objKey]object{}
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		// Removed: all its objects go.
	case err != nil:
		s.OnError(fmt.Errorf("%s: %w (keeping its previous objects)", path, err))
		return
	default:
		objs, invalid, err := parseFile(data)
		if err != nil {
			s.OnError(fmt.Errorf("%s: %w (keeping its previous objects)", path, err))
			return
		}
		for k, err := range invalid {
			s.OnError(fmt.Errorf("%s: %s: %w", path, k, err))
			if prev, ok := old[k]; ok {
				objs[k] = prev // an invalid edit keeps the last valid version
			}
		}
		next = objs
	}

	for k := range old {
		if _, ok := next[k]; !ok {
			s.deliver(k, object{})
		}
	}
	for k, o := range next {
		if prev, ok := old[k]; !ok || !reflect.DeepEqual(prev, o) {
			s.deliver(k, o)
		}
	}
	if len(next) == 0 {
		delete(s.files, path)
	} else {
		s.files[path] = next
	}
}

func (s *Source) deliver(k objKey, o object) {
	switch k.kind {
	case "Service":
		var svc *model.Service
		if o.svc != nil {
			svc = k8s.ToService(o.svc)
		}
		s.h.OnService(k.NamespacedName, svc)
	case "EndpointSlice":
		var slice *model.EndpointSlice
		if o.slice != nil {
			slice = k8s.ToEndpointSlice(o.slice)
		}
		s.h.OnEndpointSlice(k.NamespacedName, slice)
	}
}
