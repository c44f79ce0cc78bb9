// Package events is what the datapath's events are once read: Event (one
// drop, policy verdict or translation, decoded from the monitor cube's
// ring buffer), the names of its drop reasons, and Hub, which hands every
// event to every subscriber without waiting for any. The monitor cube
// (pkg/cubes/monitor) fills a Hub; the agent's local API, netcube
// monitor and the Hubble server (pkg/hubble) read it.
package events
