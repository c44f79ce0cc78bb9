package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// stream lists and watches one resource and hands every object to deliver,
// converted, the moment it arrives. It is a reflector without a store: the
// handler is the only place objects are kept, as netcube's small model
// (client-go's reflector keeps the whole initial list in a store of its own
// before handing it on, which at 100,000 Services was a third of the
// agent's peak memory). The list is paged, each page delivered and dropped.
//
// When the watch cannot resume (the API server no longer has its resource
// version), the resource is listed again; the keys the handler holds
// (known) that the new list lacks were deleted meanwhile, and are delivered
// as deletions.
type stream[T any] struct {
	name    string
	api     lister
	convert func(runtime.Object) T
	deliver func(types.NamespacedName, T) // the zero T: deleted
	forget  func(types.NamespacedName)    // optional: told of each deletion
	known   func() []types.NamespacedName // what the handler holds
	streamOptions
	// backoff between failed API requests (zero: defaultBackoff).
	backoff wait.Backoff

	// optional: the resource may not be served (a CRD not installed). A
	// list answered "not found" then means no objects: those delivered
	// are deleted, the stream counts as synced, and it lists again after
	// absentRetry (zero: defaultAbsentRetry).
	optional    bool
	absentRetry time.Duration
	// phases, if set, gets the time the first list spends converting.
	phases *listPhases

	synced    atomic.Bool // the first full list has been delivered
	delivered bool        // anything was ever delivered (a list must then report deletions)
}

// streamOptions are what every stream of a Source shares.
type streamOptions struct {
	// reach (optional) is told whether the API server answers.
	reach *reach
	// pageSize: objects per list request (0: DefaultPageSize).
	pageSize int64
	// watchList: every list is a watch that begins with every object
	// (sendInitialEvents, the API server's WatchList, KEP-3157), the
	// state complete at a bookmark, and then goes on as the watch. One
	// request instead of pages then a watch, which the API server serves
	// from its watch cache as a stream of events rather than building
	// list responses. Cleared, for good, if the API server refuses it.
	watchList bool
}

// reach tracks whether the API server answers, for readiness: since when
// every request has failed (0: it answers).
type reach struct{ failingSince atomic.Int64 }

func (r *reach) failed() {
	if r != nil {
		r.failingSince.CompareAndSwap(0, time.Now().UnixNano())
	}
}

func (r *reach) answered() {
	if r != nil {
		r.failingSince.Store(0)
	}
}

// unreachableFor is how long requests have been failing (0: they do not).
func (r *reach) unreachableFor() time.Duration {
	since := r.failingSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// DefaultPageSize is the objects per list request. The API server serves
// every page of a list from its watch cache by walking the objects from
// the page's first to the end of the list (kube-apiserver v1.36's
// btreeStore.ListPrefix, which has no limit, and Count for the remaining
// item count), so a list of N objects in pages of P costs it about
// N*N/(2P) object visits: at 200,000 EndpointSlices, 2,000 a page was half
// of its CPU time while an agent started. Larger pages cut that in
// proportion; the agent holds one page being converted and the next one,
// asked for early (a page of 10,000 EndpointSlices is about 3 MB).
const DefaultPageSize = 10000

// defaultAbsentRetry: how soon an optional resource not served is looked
// for again (the CRD installed after the agent started).
const defaultAbsentRetry = 10 * time.Second

// defaultBackoff spaces the retries of failed API requests: from 100 ms,
// doubling, each wait drawn anywhere between it and twice it (full
// jitter), to at most 10-20 s. When the API server restarts under many
// agents, every agent's watches fail together; full jitter spreads their
// relists over the last interval instead of clumping them (as ±20% did),
// and the 10 s cap bounds how long an agent stays behind once the server
// is back (bench scale measures both).
var defaultBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: 10 * time.Second}

// lister is the API: a resource's paged list and its watch.
type lister interface {
	List(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// errRelist: the watch cannot resume from its resource version.
var errRelist = errors.New("resource version too old: relisting")

// run lists, then watches, until ctx ends; API errors are retried with
// backoff, and logged.
func (s *stream[T]) run(ctx context.Context) {
	if s.pageSize == 0 {
		s.pageSize = DefaultPageSize
	}
	if s.backoff == (wait.Backoff{}) {
		s.backoff = defaultBackoff
	}
	if s.absentRetry == 0 {
		s.absentRetry = defaultAbsentRetry
	}
	backoff := s.backoff
	rv := ""
	absent := false // logged once per absence
	for ctx.Err() == nil {
		var err error
		switch {
		case rv == "" && s.watchList:
			rv, err = s.watchListAll(ctx)
		case rv == "":
			rv, err = s.listAll(ctx)
		default:
			rv, err = s.watchFrom(ctx, rv)
		}
		switch {
		case ctx.Err() != nil:
			return
		case s.optional && apierrors.IsNotFound(err):
			s.reach.answered()
			if !absent {
				slog.Info("the API server does not serve this resource (its CRD is not installed): none", "resource", s.name, "retry", s.absentRetry)
				absent = true
			}
			s.deleteMissing(nil)
			s.synced.Store(true)
			rv = ""
			select {
			case <-time.After(s.absentRetry):
			case <-ctx.Done():
			}
		case errors.Is(err, errRelist):
			slog.Info("watch expired, relisting", "resource", s.name)
			rv = ""
		case err != nil:
			s.reach.failed()
			d := backoff.Step()
			slog.Error("API request failed, retrying", "resource", s.name, "in", d, "err", err)
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		default:
			backoff = s.backoff // a watch that ran normally until it timed out
			absent = false
		}
	}
}

// listAll delivers every object, page by page, then the deletions a relist
// reveals; it returns the list's resource version, to watch from.
func (s *stream[T]) listAll(ctx context.Context) (string, error) {
	var seen map[types.NamespacedName]struct{}
	if s.delivered {
		seen = map[types.NamespacedName]struct{}{}
	}
	// The next page is asked for as soon as this one's continue token is
	// known, so the API server serves it while this one is decoded and
	// handed on.
	fetchCtx, stopFetch := context.WithCancel(ctx)
	opts := metav1.ListOptions{Limit: s.pageSize}
	next := s.fetch(fetchCtx, opts)
	defer func() {
		stopFetch()
		if next != nil { // a page asked for and not read: close its body
			go discardPage(next)
		}
	}()
	for {
		a := <-next
		next = nil
		page, err := a.page, a.err
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			// The continue token expired: start over, as a relist.
			slog.Info("list continuation expired, listing again", "resource", s.name)
			return s.listAll(ctx)
		}
		if err != nil {
			return "", fmt.Errorf("list %s: %w", s.name, err)
		}
		s.reach.answered()
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return "", err
		}
		if lm.GetContinue() != "" {
			opts.Continue = lm.GetContinue()
			next = s.fetch(fetchCtx, opts)
		}
		put := func(obj runtime.Object) error {
			key, err := s.put(obj)
			if seen != nil && err == nil {
				seen[key] = struct{}{}
			}
			return err
		}
		if p, ok := page.(*pagedList); ok {
			err = p.each(put)
		} else {
			err = meta.EachListItem(page, put)
		}
		if err != nil {
			return "", err
		}
		if lm.GetContinue() == "" {
			if seen != nil {
				s.deleteMissing(seen)
			}
			s.synced.Store(true)
			return lm.GetResourceVersion(), nil
		}
	}
}

// discardPage closes the body of the page answered on c, if any.
func discardPage(c <-chan listAnswer) {
	if p, ok := (<-c).page.(*pagedList); ok {
		p.closer.Close()
	}
}

// listAnswer is one list request's page or error.
type listAnswer struct {
	page runtime.Object
	err  error
}

// fetch asks for one page in the background; its answer arrives on the
// channel returned (buffered: an answer nobody waits for is dropped with
// it).
func (s *stream[T]) fetch(ctx context.Context, o metav1.ListOptions) <-chan listAnswer {
	c := make(chan listAnswer, 1)
	go func() {
		page, err := s.api.List(ctx, o)
		c <- listAnswer{page, err}
	}()
	return c
}

func (s *stream[T]) deleteMissing(seen map[types.NamespacedName]struct{}) {
	for _, k := range s.known() {
		if _, ok := seen[k]; !ok {
			s.delete(k)
		}
	}
}

// delete delivers k's deletion.
func (s *stream[T]) delete(k types.NamespacedName) {
	var gone T
	s.deliver(k, gone)
	if s.forget != nil {
		s.forget(k)
	}
}

// watchTimeout is a watch's timeout in seconds. The API server ends
// watches after it; a random one spreads the agents' re-watches (as
// client-go's reflector does).
func watchTimeout() *int64 {
	t := int64(300 + rand.IntN(300))
	return &t
}

// watchFrom delivers changes after resource version rv until the API server
// ends the watch; it returns the last resource version seen.
func (s *stream[T]) watchFrom(ctx context.Context, rv string) (string, error) {
	w, err := s.api.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout()})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return rv, errRelist
	}
	if err != nil {
		return rv, fmt.Errorf("watch %s: %w", s.name, err)
	}
	s.reach.answered()
	return s.consume(ctx, w, rv, nil)
}

// watchListAll is listAll as one watch (watchList): every object arrives
// as an addition, a bookmark annotated k8s.io/initial-events-end marks the
// state complete (and, on a relist, what it lacked is deleted), and the
// same watch then carries the changes. An API server that refuses the
// request (one without WatchList) is listed instead, from then on.
func (s *stream[T]) watchListAll(ctx context.Context) (string, error) {
	yes := true
	w, err := s.api.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout()})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) {
		slog.Info("the API server refuses watch-list streaming: listing in pages instead", "resource", s.name, "err", err)
		s.watchList = false
		return s.listAll(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("watch-list %s: %w", s.name, err)
	}
	s.reach.answered()
	initial := &initialEvents{}
	if s.delivered {
		initial.seen = map[types.NamespacedName]struct{}{}
	}
	return s.consume(ctx, w, "", initial)
}

// initialEvents is a watch-list's state until its initial events end.
type initialEvents struct {
	done bool
	seen map[types.NamespacedName]struct{} // on a relist: every key delivered
}

// consume delivers w's events until it ends; it returns the last resource
// version seen ("" while a watch-list's initial events have not ended:
// the state is incomplete, and listed again).
func (s *stream[T]) consume(ctx context.Context, w watch.Interface, rv string, initial *initialEvents) (string, error) {
	defer w.Stop()
	resume := func() string {
		if initial != nil && !initial.done {
			return ""
		}
		return rv
	}
	start, events := time.Now(), 0
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.ResultChan():
		case <-ctx.Done():
			return resume(), nil
		}
		if !ok {
			if initial != nil && !initial.done {
				return "", fmt.Errorf("watch-list %s: ended before its initial events did", s.name) // back off
			}
			if events == 0 && time.Since(start) < time.Second {
				return rv, fmt.Errorf("watch %s: closed at once", s.name) // back off
			}
			return rv, nil // the API server's watch timeout: resume
		}
		events++
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return resume(), errRelist
			}
			return resume(), fmt.Errorf("watch %s: %w", s.name, err)
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return resume(), fmt.Errorf("watch %s: %w", s.name, err)
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			key, err := s.put(ev.Object)
			if err != nil {
				return resume(), err
			}
			if initial != nil && initial.seen != nil && !initial.done {
				initial.seen[key] = struct{}{}
			}
		case watch.Deleted:
			s.delete(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
		case watch.Bookmark:
			if initial != nil && !initial.done && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				initial.done = true
				if initial.seen != nil {
					s.deleteMissing(initial.seen)
					initial.seen = nil
				}
				s.synced.Store(true)
			}
		}
		rv = m.GetResourceVersion()
	}
}

func (s *stream[T]) put(obj runtime.Object) (types.NamespacedName, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("%s: %w", s.name, err)
	}
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
	if s.phases != nil && !s.synced.Load() {
		defer s.phases.since(phaseConvert, time.Now())
	}
	s.deliver(key, s.convert(obj))
	s.delivered = true
	return key, nil
}
