// Package policy is the Go side of the policy cube: Kubernetes
// NetworkPolicy (networking.k8s.io/v1) compiled for one node's datapath.
//
// The cluster's pods, namespaces and policies (Cluster) are compiled into
// Tables: an identity cache (each address to the identity of its class:
// the pods of one namespace with the same labels and in the same IP
// blocks, or a region of IP blocks outside the pods), this node's pods that
// policies isolate (Endpoints), and the allowed (endpoint, direction, peer
// identity, protocol, port prefix) Entries. A packet costs one identity
// lookup and at most four entry lookups whatever the number of policies or
// pods. Tables.Allows evaluates the tables exactly as those lookups do; the
// tests hold it against cyclonus's independent model of the API.
//
// The Compiler builds the tables whole once, then keeps them current
// change by change (Compiler.Update): a change recompiles only the pod
// entries, identities and policies it touches, and the maps get only the
// keys that changed (SyncChanges). A test holds every Update against a
// whole compilation, over random changes.
package policy
