package flows

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// server is a Hubble API server and how to reach it, named by the flags
// the hubble CLI names them by.
type server struct {
	addr              string // unix:///path or host:port
	tls               bool
	caFiles           []string
	certFile, keyFile string
	serverName        string
	allowInsecure     bool
}

// window is which flows: those since a time, or the last N, or those
// that come for a while (follow).
type window struct {
	since    time.Duration
	last     uint64
	follow   bool
	duration time.Duration
}

// checkFlags refuses TLS flags that do not go together. A TLS file
// given without --tls fails: the user meant TLS, and would otherwise get
// a plain connection.
func (s server) checkFlags() error {
	if !s.tls {
		for _, f := range []struct{ flag, v string }{{"--tls-client-cert-file", s.certFile}, {"--tls-client-key-file", s.keyFile},
			{"--tls-ca-cert-files", strings.Join(s.caFiles, ",")}, {"--tls-server-name", s.serverName}} {
			if f.v != "" {
				return fmt.Errorf("%s is given without --tls", f.flag)
			}
		}
		if s.allowInsecure {
			return errors.New("--tls-allow-insecure is given without --tls")
		}
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return errors.New("--tls-client-cert-file and --tls-client-key-file go together: give both or neither")
	}
	return nil
}

// credentials are the connection's: plain, or TLS with the CAs and the
// client certificate given.
func (s server) credentials() (credentials.TransportCredentials, error) {
	if err := s.checkFlags(); err != nil {
		return nil, err
	}
	if !s.tls {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName, InsecureSkipVerify: s.allowInsecure}
	if len(s.caFiles) > 0 {
		pool := x509.NewCertPool()
		for _, f := range s.caFiles {
			pem, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca-cert-files: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca-cert-files: %s has no PEM certificate", f)
			}
		}
		cfg.RootCAs = pool
	}
	if s.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-cert-file %s, --tls-client-key-file %s: %w", s.certFile, s.keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// target is the address gRPC dials; a unix socket that is not there is
// told as such (the agent not running, or its --hubble-socket elsewhere).
func (s server) target() (string, error) {
	if path, ok := strings.CutPrefix(s.addr, "unix://"); ok {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("--server %s: no socket at %s (is the agent running, with --hubble-socket %s?)", s.addr, path, path)
		}
		return s.addr, nil
	}
	if !strings.Contains(s.addr, ":") {
		return "", fmt.Errorf("--server %q: want unix:///path or host:port", s.addr)
	}
	return "passthrough:///" + s.addr, nil
}

// flows asks the server for the window's flows and gives each response
// to add as it comes.
func (s server) flows(ctx context.Context, w window, add func(*observerpb.GetFlowsResponse)) error {
	creds, err := s.credentials()
	if err != nil {
		return err
	}
	target, err := s.target()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("--server %s: %w", s.addr, err)
	}
	defer conn.Close()
	req := &observerpb.GetFlowsRequest{Number: w.last}
	now := time.Now()
	if w.since > 0 {
		req.Since = timestamppb.New(now.Add(-w.since))
	}
	if w.follow {
		req.Follow = true
		if w.duration > 0 {
			req.Until = timestamppb.New(now.Add(w.duration))
			// The server ends the stream at Until (it looks each second);
			// the deadline is for one that does not.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, w.duration+3*time.Second)
			defer cancel()
		}
	}
	stream, err := observerpb.NewObserverClient(conn).GetFlows(ctx, req)
	if err != nil {
		return s.explain(err)
	}
	for {
		r, err := stream.Recv()
		switch {
		case err == io.EOF:
			return nil
		case err != nil && w.follow && (ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded):
			return nil // the duration is up, or interrupted: what came is the map
		case err != nil:
			return s.explain(err)
		}
		add(r)
	}
}

// explain says what a gRPC error means for the one running the command.
func (s server) explain(err error) error {
	switch status.Code(err) {
	case codes.Unavailable:
		return fmt.Errorf("--server %s: no Hubble server answers: %s", s.addr, status.Convert(err).Message())
	case codes.Unimplemented:
		return fmt.Errorf("--server %s: not a Hubble Observer API: %s", s.addr, status.Convert(err).Message())
	}
	return fmt.Errorf("--server %s: %w", s.addr, err)
}
