package policy_test

import "github.com/netcube/netcube/pkg/datapath"

// loadTrusting loads the datapath with from_pod's source check off
// (router_check_sources): these tests send from addresses no pod device
// of theirs owns. The check's own tests (pkg/datapath sources_test.go)
// load it on, as every node's datapath is.
func loadTrusting(cfg datapath.Config) (*datapath.Datapath, error) {
	vars := map[string]any{"router_check_sources": uint8(0)}
	for k, v := range cfg.Variables {
		vars[k] = v
	}
	cfg.Variables = vars
	return datapath.Load(cfg)
}
