package bgp

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// speaker is what the Controller drives (a *Speaker; a fake in tests).
type speaker interface {
	Apply(ctx context.Context, cfg Config, routes []Route) error
	Stop(ctx context.Context, graceful bool) error
}

// SecretReader reads one key of a Secret in netcube's namespace (the
// peers' TCP MD5 passwords).
type SecretReader func(ctx context.Context, name, key string) (string, error)

// Controller is the agent's BGP control plane: it is given this node's
// Node, the NetworkBGPPeerings and, from the lb reconciler
// (lb.Advertiser), what each Service may announce; it keeps the speaker
// running exactly the sessions and routes these call for. Every change
// makes the whole desired state again, applied by one worker, so a
// failed Apply is retried (with backoff) until it converges, and nothing
// blocks the sources that call it.
type Controller struct {
	node    string
	speaker speaker
	secrets SecretReader
	report  *report.Reporter

	mu       sync.Mutex
	info     *model.NodeInfo
	peerings map[string]*model.BGPPeering
	services map[model.ServiceID]lb.Advertised
	// ready: the Services' initial state and the peerings have been
	// delivered (until then an Apply would withdraw what the previous
	// agent announced, before its routes are known again).
	servicesSynced, peeringsSynced bool
	reported                       map[string]bool // peerings with a standing problem
	last                           Applied

	kick chan struct{}
}

// Applied is what the controller last applied.
type Applied struct {
	Active bool
	Config Config
	Routes []Route
	Err    error
	At     time.Time
}

var _ lb.Advertiser = (*Controller)(nil)

// NewController returns the controller of node's speaker.
func NewController(node string, sp speaker, secrets SecretReader, rep *report.Reporter) *Controller {
	return &Controller{node: node, speaker: sp, secrets: secrets, report: rep,
		peerings: map[string]*model.BGPPeering{}, services: map[model.ServiceID]lb.Advertised{},
		reported: map[string]bool{}, kick: make(chan struct{}, 1)}
}

func (c *Controller) changed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// OnNode keeps this node's Node (others are not needed).
func (c *Controller) OnNode(name string, n *model.NodeInfo) {
	if name != c.node {
		return
	}
	c.mu.Lock()
	c.info = n
	c.mu.Unlock()
	c.changed()
}

// OnNodesSynced: nothing to do (only this node's Node is kept).
func (c *Controller) OnNodesSynced() {}

// OnBGPPeering keeps a peering (nil: deleted, or unreadable).
func (c *Controller) OnBGPPeering(name string, p *model.BGPPeering) {
	c.mu.Lock()
	if p == nil {
		delete(c.peerings, name)
	} else {
		c.peerings[name] = p
	}
	c.mu.Unlock()
	c.changed()
}

// OnBGPPeeringsSynced: every peering listed has been delivered.
func (c *Controller) OnBGPPeeringsSynced() {
	c.mu.Lock()
	c.peeringsSynced = true
	c.mu.Unlock()
	c.changed()
}

// BGPPeeringKeys lists the peerings held.
func (c *Controller) BGPPeeringKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.peerings {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// SetService is told what a Service may announce (lb.Advertiser).
func (c *Controller) SetService(id model.ServiceID, a lb.Advertised) {
	c.mu.Lock()
	c.services[id] = a
	c.mu.Unlock()
	c.changed()
}

// DeleteService: the Service announces nothing (lb.Advertiser).
func (c *Controller) DeleteService(id model.ServiceID) {
	c.mu.Lock()
	_, had := c.services[id]
	delete(c.services, id)
	c.mu.Unlock()
	if had {
		c.changed()
	}
}

// ServicesSynced: the lb reconciler's initial sync is done, so every
// Service has been told.
func (c *Controller) ServicesSynced() {
	c.mu.Lock()
	c.servicesSynced = true
	c.mu.Unlock()
	c.changed()
}

// Last is what was last applied.
func (c *Controller) Last() Applied {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Run applies every change until ctx ends; then it stops the speaker
// gracefully (the routers keep this node's routes through an agent
// restart, for the peers with graceful restart).
func (c *Controller) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := c.speaker.Stop(stop, true); err != nil {
				slog.Warn("bgp: stop", "err", err)
			}
			cancel()
			return
		case <-c.kick:
		case <-retry:
		}
		if err := c.sync(ctx); err != nil {
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			slog.Error("bgp: not applied, retrying", "in", backoff, "err", err)
			continue
		}
		backoff = 0
	}
}

// sync applies the desired state once.
func (c *Controller) sync(ctx context.Context) error {
	c.mu.Lock()
	if !c.servicesSynced || !c.peeringsSynced {
		c.mu.Unlock()
		return nil
	}
	info := c.info
	peerings := make(map[string]*model.BGPPeering, len(c.peerings))
	for k, v := range c.peerings {
		peerings[k] = v
	}
	// The Services are copied only for a node some peering selects: on
	// every other node (most clusters: every node) a Service change
	// costs this check, not a copy of every Service.
	var services map[model.ServiceID]lb.Advertised
	if selects(info, peerings) {
		services = make(map[model.ServiceID]lb.Advertised, len(c.services))
		for k, v := range c.services {
			services[k] = v
		}
	}
	c.mu.Unlock()

	password := func(k *model.SecretKey) (string, error) {
		if c.secrets == nil {
			return "", errNoSecrets
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.secrets(rctx, k.Name, k.Key)
	}
	cfg, routes, active, problems := desired(info, peerings, services, password)
	c.reportProblems(problems)
	var err error
	if active {
		err = c.speaker.Apply(ctx, cfg, routes)
	} else {
		err = c.speaker.Stop(ctx, false)
	}
	c.mu.Lock()
	c.last = Applied{Active: active, Config: cfg, Routes: routes, Err: err, At: time.Now()}
	c.mu.Unlock()
	return err
}

// reportProblems names each peering's problems in a Warning Event (one
// per peering and reason, the messages joined), and clears those gone.
func (c *Controller) reportProblems(problems []problem) {
	type key struct {
		name   string
		reason report.Reason
	}
	standing := map[key][]error{}
	for _, p := range problems {
		k := key{p.peering, report.PeerLeftOut}
		if p.conflict {
			k.reason = report.PeeringConflict
		}
		standing[k] = append(standing[k], p.err)
	}
	for k, errs := range standing {
		c.report.SetErr(report.Object{Kind: "NetworkBGPPeering", Name: k.name}, k.reason, errors.Join(errs...))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.reported {
		name, reason, _ := strings.Cut(k, "\x00")
		if _, ok := standing[key{name, report.Reason(reason)}]; !ok {
			c.report.Clear(report.Object{Kind: "NetworkBGPPeering", Name: name}, report.Reason(reason))
		}
	}
	c.reported = map[string]bool{}
	for k := range standing {
		c.reported[k.name+"\x00"+string(k.reason)] = true
	}
}
