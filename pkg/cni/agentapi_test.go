package cni

import (
	"bufio"
	"strings"
	"testing"
)

// TestReadResponse: the plugin's own HTTP reading, on answers as the
// agent's net/http server writes them and on what it must refuse.
func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		status     int
		body, fail string
	}{
		{name: "ok with a length", in: "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n", status: 200, body: "ok\n"},
		{name: "no length: to the end", in: "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\ndatapath not loaded\n", status: 503, body: "datapath not loaded\n"},
		{name: "a length shorter than what follows", in: "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nfailtrailing", status: 500, body: "fail"},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n", fail: "chunked"},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n", fail: "not HTTP"},
		{name: "bad length", in: "HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n", fail: "Content-Length"},
		{name: "cut short", in: "HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nok", fail: "read the agent's answer"},
		{name: "no headers' end", in: "HTTP/1.0 200 OK\r\n", fail: "read the agent's answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := readResponse(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fail) {
					t.Fatalf("got %d %q, %v; want an error naming %q", status, body, err, tc.fail)
				}
				return
			}
			if err != nil || status != tc.status || string(body) != tc.body {
				t.Fatalf("got %d %q, %v; want %d %q", status, body, err, tc.status, tc.body)
			}
		})
	}
}
