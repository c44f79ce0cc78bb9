// Command netcube-operator does netcube's cluster-scoped writing, which no
// node's agent is trusted with: it gives LoadBalancer Services their IPs
// from the NetworkLoadBalancerPools (package lbipam), writing the
// Services' status.loadBalancer and cleanup finalizer. Replicas elect one
// of them through a Lease the chart creates (its Role names that Lease
// alone). It runs as its own ServiceAccount, so that a compromised node,
// holding only its agent's token, can redirect no Service.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netcube/netcube/pkg/lbipam"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source/kube"
)

// LeaseName is the Lease that elects the assigning replica (the chart
// creates it; the operator may get and update it, not create one).
const LeaseName = "netcube-lb-ipam"

type options struct {
	kubeconfig, namespace, identity, lease, healthz string
	pageSize                                        int64
}

func main() {
	host, _ := os.Hostname()
	o := options{}
	fs := flag.NewFlagSet(os.Args[0], flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: in-cluster config)")
	fs.StringVar(&o.namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "kube-system"), "namespace of the Lease (default $POD_NAMESPACE, then kube-system)")
	fs.StringVar(&o.identity, "identity", cmp.Or(os.Getenv("POD_NAME"), host), "this replica's name in the Lease (default $POD_NAME, then the hostname)")
	fs.StringVar(&o.lease, "lease", LeaseName, "the Lease that elects the replica assigning LoadBalancer IPs")
	fs.StringVar(&o.healthz, "healthz-bind-address", "", "address of /healthz (\"\": off)")
	fs.Int64Var(&o.pageSize, "api-list-page-size", 0, "Services per list request (0: the default)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		slog.Error("netcube-operator", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	var rc *rest.Config
	var err error
	if o.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("Kubernetes API config (give --kubeconfig): %w", err)
	}
	rc.UserAgent = "netcube-operator"
	rc.QPS, rc.Burst = 20, 40
	if o.identity == "" {
		return fmt.Errorf("--identity: empty (no $POD_NAME, no hostname)")
	}
	// JSON: the dynamic client reads no protobuf (the Services' cache
	// asks for its own encoding).
	jc := rest.CopyConfig(rc)
	jc.ContentType, jc.AcceptContentTypes = "application/json", "application/json"
	dyn, err := dynamic.NewForConfig(jc)
	if err != nil {
		return err
	}
	events, err := kube.NewEventSink(rc, o.identity)
	if err != nil {
		return err
	}
	go events.Run(ctx)
	rep := report.New()
	rep.Sink = events
	if o.healthz != "" {
		if err := serveHealth(ctx, o.healthz); err != nil {
			return err
		}
	}
	e := &lbipam.Elector{Client: dyn, Namespace: o.namespace, Name: o.lease, Identity: o.identity,
		Lead: (&lbipam.Controller{Client: dyn, Config: rc, PageSize: o.pageSize, Report: rep}).Run}
	slog.Info("netcube-operator: electing the LoadBalancer IP assigner", "lease", o.namespace+"/"+o.lease, "identity", o.identity)
	e.Run(ctx)
	return nil
}

// serveHealth answers /healthz while the process runs (the election's
// state is in the Lease, and in the log).
func serveHealth(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--healthz-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}
