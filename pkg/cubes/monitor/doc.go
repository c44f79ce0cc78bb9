// Package monitor is the Go side of the monitor cube (bpf/cubes/monitor):
// how the datapath explains itself. The programs count every drop by
// reason (always), the packets and bytes each cube handled (monitor_cubes,
// while asked), and write events to a ring buffer when the agent asks:
// each dropped packet, each connection a policy allowed, and the first
// packet of each flow a cube translated (trace, off by default). This
// package sets what is asked (monitor_config), reads the ring buffer into
// Events, hands them to every subscriber without ever waiting for one (a
// slow subscriber loses events, counted), serves them on the agent's local
// API (/v1/monitor) and exports the counters on /metrics.
package monitor
