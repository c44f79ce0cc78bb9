package agent

import (
	"context"
	"log/slog"
	"math/bits"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/source/kube"
)

// The policy cube's identity map of addresses (pol_hosts) holds every pod
// address of the cluster, so its size is the cluster's, not the
// node's: a map too small fails closed (pkg/cubes/policy quarantines the
// pods it cannot write), which a fixed default would do to every pod of a
// large cluster. So, unless --policy-identity-map-size (or mapSizes) says
// otherwise, the agent sizes it at start from the number of Pods the
// API holds: identityMapSize. A cluster that grows past that fails closed,
// reports it, and is sized again at the agent's next start (the map's
// entries carried over to the larger one). (pol_peers holds ipBlock
// regions, not pods: its default stays.)

// identityMapSize is pol_hosts' size for a cluster of pods: room
// for two addresses per pod (dual stack), twice over for growth, as a
// power of two, and never below the cube's default.
func identityMapSize(pods int) uint32 {
	const floor = 65536
	need := uint64(pods) * 2 * 2
	if need <= floor {
		return floor
	}
	if need > 1<<30 {
		return 1 << 30
	}
	return 1 << bits.Len64(need-1)
}

// countPods asks the API how many Pods the cluster holds: one object and
// the count of the rest (remainingItemCount), not a list of them all.
func countPods(ctx context.Context, rc *rest.Config) (int, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	}
	return n, nil
}

// sizeIdentityMaps sets cfg's size of pol_hosts from the cluster's Pods
// (rc: the API; nil, a manifest directory: nothing to count), unless
// they are given. Counting that fails leaves the defaults, with a warning:
// the datapath loads all the same.
func sizeIdentityMaps(ctx context.Context, cfg *Config, rc *rest.Config) {
	if rc == nil || cfg.PodSource != kube.PodsFromAPI {
		return // (NodePods: this agent may not list Pods)
	}
	if cfg.MapSizes[policy.MapHosts] != 0 {
		return // the operator's size
	}
	pods, err := countPods(ctx, rc)
	if err != nil {
		slog.Warn("cannot count the cluster's Pods to size the policy identity maps: their default size is used (--policy-identity-map-size sets it)",
			"err", err, "size", identityMapSize(0))
		return
	}
	size := identityMapSize(pods)
	if cfg.MapSizes == nil {
		cfg.MapSizes = map[string]uint32{}
	}
	cfg.MapSizes[policy.MapHosts] = size
	slog.Info("policy identity maps sized from the cluster", "pods", pods, "entries", size)
}
