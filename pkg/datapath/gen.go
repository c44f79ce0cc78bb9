package datapath

// The include path carries the multiarch asm/ headers the uapi headers need.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package datapath -type lb_svc_key -type lb_svc_val -type lb_backend -type lb_frontend -type ct_key -type ct_entry -type sock_key -type sock_revnat_val -type nc_addr -type ct_dir -type ct_flags -type lb_svc_flags -type node_addr_index -type lb_sock_mark -type router_endpoint -type router_node -type router_conf -type router_mode -type nc_prefix -type pol_identity -type pol_endpoint -type pol_endpoint_flags -type pol_dir -type pol_entry_key -type pol_entry -type pol_peer -type pol_drop_key -type pol_drop_reason -type pol_entry_bits bpf ../../bpf/entry/netcube.c
