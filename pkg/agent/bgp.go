package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/pkg/bgp"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/localapi"
	"github.com/netcube/netcube/pkg/report"
)

// bgpControl is the node's BGP control plane: its speaker and the
// controller that keeps it announcing what the NetworkBGPPeerings that
// select this node ask. It does nothing (no GoBGP server, no socket)
// until one does.
type bgpControl struct {
	speaker *bgp.Speaker
	ctl     *bgp.Controller
	done    chan struct{}
}

// newBGP makes the node's BGP control plane and has the Service
// reconciler tell it what each Service may announce; start runs it.
func newBGP(cfg Config, rep *report.Reporter, rec cube.Reconciler) (*bgpControl, error) {
	sp := bgp.New(logrus.StandardLogger())
	secrets, err := secretReader(cfg)
	if err != nil {
		return nil, err
	}
	b := &bgpControl{speaker: sp, ctl: bgp.NewController(cfg.NodeName, sp, secrets, rep), done: make(chan struct{})}
	if a, ok := rec.(interface{ SetAdvertiser(lb.Advertiser) }); ok {
		a.SetAdvertiser(b.ctl)
	}
	return b, nil
}

// start runs the controller until ctx ends; wait waits (a few seconds at
// most) for it to have closed its sessions, so that the routers keep
// this node's routes (graceful restart) through the agent's restart.
func (b *bgpControl) start(ctx context.Context) {
	go func() {
		defer close(b.done)
		b.ctl.Run(ctx)
	}()
}

func (b *bgpControl) wait() {
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		slog.Warn("bgp: the speaker did not stop within 10 s")
	}
}

// secretReader reads the peers' passwords from Secrets in the agent's own
// namespace (POD_NAMESPACE, set by the chart), which the chart's
// bgp.secretNames lets it read; with a manifest directory, none.
func secretReader(cfg Config) (bgp.SecretReader, error) {
	if cfg.Manifests != "" {
		return nil, nil
	}
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, nil // no API server: the source says so
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("bgp: %w", err)
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kube-system"
	}
	return func(ctx context.Context, name, key string) (string, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := s.Data[key]
		if !ok {
			return "", fmt.Errorf("has no key %q", key)
		}
		return string(v), nil
	}, nil
}

// handler serves localapi.BGPPath.
func (b *bgpControl) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := b.ctl.Last()
		st := localapi.BGPStatus{Active: last.Active, AppliedAt: last.At}
		if last.Err != nil {
			st.Error = last.Err.Error()
		}
		if last.Active {
			st.LocalASN, st.RouterID = last.Config.LocalASN, last.Config.RouterID.String()
			peers, err := b.speaker.Peers(r.Context())
			if err != nil && st.Error == "" {
				st.Error = err.Error()
			}
			for _, p := range peers {
				st.Peers = append(st.Peers, localapi.BGPPeer{Address: p.Address.String(), ASN: p.ASN, State: p.State,
					Uptime: p.Uptime, Advertised: p.Advertised, Received: p.Received, Accepted: p.Accepted})
			}
			for _, rt := range last.Routes {
				out := localapi.BGPRoute{Prefix: rt.Prefix.String(), Communities: rt.Communities, LocalPref: rt.LocalPref}
				if rt.NextHop.IsValid() {
					out.NextHop = rt.NextHop.String()
				}
				st.Routes = append(st.Routes, out)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
}
