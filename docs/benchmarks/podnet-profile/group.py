#!/usr/bin/env python3
"""Group a `perf report --no-children --sort sym --stdio -g none` output.
usage: group.py [--unassigned N] [--syms GROUP] CASE=report.txt:rate_per_s ...
Prints, per group, the share of samples and ns per operation (share x 1e9/rate)."""
import re, sys
GROUPS = [
 ("netcube BPF programs (bpf_prog_*)", r"^bpf_prog_"),
 ("BPF hash maps (htab_*, lookup_nulls_elem_raw, bpf_mem_*, pcpu_freelist)", r"^(htab_|__htab_|lookup_nulls_elem_raw|lookup_elem_raw|alloc_htab_elem|bpf_mem_|unit_alloc|unit_free|pcpu_freelist|___pcpu_freelist|bpf_map_|free_htab_elem|check_and_free_fields|htab_lru|__pcpu_freelist|bpf_lru|bpf_percpu|pcpu_alloc|free_percpu|bpf_obj_free)"),
 ("tc hook, redirect, helpers (tc_run, cls_bpf_classify, tcf_classify, skb_do_redirect, bpf_redirect_peer, bpf_skb_*, dev_get_by_index_rcu)", r"^(tc_run|tcf_classify|__tcf_classify|cls_bpf_classify|sch_handle_ingress|sch_handle_egress|tcx_|skb_do_redirect|__bpf_redirect|bpf_redirect|bpf_skb_|bpf_ktime|bpf_get_|bpf_l3_|bpf_l4_|bpf_csum|bpf_fib|bpf_tail|bpf_dispatcher|bpf_loop|bpf_for_each|skb_ensure_writable|dev_get_by_index_rcu|bpf_spin|bpf_perf_event_output|bpf_ringbuf|bpf_event_output)"),
 ("kernel BPF hooks present in both (sk/inode storage, sockops header options, trampolines)", r"^(bpf_sk_storage|bpf_skops|__bpf_prog_enter|__bpf_prog_exit|bpf_inode_storage|bpf_lsm|bpf_trampoline|__bpf_tramp|cgroup_bpf|__cgroup_bpf|bpf_local_storage|bpf_selem|bpf_task_storage)"),
 ("veth (veth_*)", r"^veth_"),
 ("device receive and softirq (__netif_receive_skb_core, process_backlog, net_rx_action, netif_rx, eth_type_trans, ...)", r"^(__netif_receive|netif_receive|process_backlog|net_rx_action|__netif_rx|netif_rx|enqueue_to_backlog|eth_type_trans|do_softirq|__do_softirq|handle_softirqs|__local_bh_enable|local_bh_enable|__napi_poll|napi_|skb_defer|__dev_forward_skb|__dev_forward|__netif_receive_skb_one_core|gro_|dev_gro|rps_|__raise_softirq|raise_softirq|irq_exit|__irq_exit|skb_set_owner|sk_filter_trim_cap|skb_pull|__skb_pull|netdev_rx_csum|skb_clear_tstamp)"),
 ("device transmit (__dev_queue_xmit, dev_hard_start_xmit, validate_xmit_skb, ...)", r"^(__dev_queue_xmit|dev_queue_xmit|dev_hard_start_xmit|validate_xmit|netdev_core_pick_tx|netdev_pick_tx|skb_network_protocol|netif_skb_features|harmonize_features|qdisc_|sch_direct_xmit|neigh_|__neigh|eth_header|dev_qdisc|skb_csum_hwoffload|netdev_)"),
 ("IP layer and routing (ip_*, ip6_*, fib*, dst_*, rt6_*)", r"^(ip_|__ip_|ip6_|__ip6_|ipv4_|ipv6_|inet_gro|inet6_|fib|__fib|dst_|rt6_|rt_|__rt|raw_local_deliver|raw_v6|icmp|l3mdev|ipv6_rcv|ip6t|xfrm|__xfrm|find_match|__find_rr|rt_dst|inet_addr_type|__inet_dev_addr|ipv4_mtu|skb_dst|ip_route|nf_hook|ip_local|ipv6_chk|netif_is_l3)"),
 ("netfilter and conntrack (nf_*, nft_*, ipt_*)", r"^(nf_|nft_|ipt_|ip6t_|__nf_|xt_|nf_conntrack|ipv4_conntrack|ipv6_conntrack|br_)"),
 ("TCP and sockets (tcp_*, inet_*, sk_*, sock_*, bbr_*)", r"^(tcp|__tcp|inet_|__inet|inet6_|__inet6|bbr_|sk_|__sk_|sock_|__sock|release_sock|lock_sock|__release_sock|reqsk_|inet_csk|__inet_csk|skb_copy_datagram|__skb_datagram_iter|simple_copy_to_iter|skb_entail|skb_attempt_defer|secure_tcp|secure_ipv6|siphash|__siphash|ipv4_dst_check|ip6_dst_check|security_sk|security_sock|security_inet|tcp_|skb_clone|__skb_clone|__copy_skb_header|skb_push|skb_put|skb_release_head_state|__skb_|skb_try_coalesce|__sk_mem|sk_stream|sk_page_frag|sk_wait|sk_reset_timer|sk_stop_timer|mem_cgroup_charge_skmem|mem_cgroup_uncharge_skmem|__sk_flush|cookie|inet_sk|bpf_skops|__cgroup_bpf|cgroup_bpf|dst_release|csum_partial|skb_checksum|__skb_checksum|csum_|chacha|get_random|_get_random|__get_random|prandom|net_rand|__percpu_counter|percpu_counter|inet_ehash|__inet_hash|inet_hash|inet_unhash|inet_bind|inet_twsk|__inet_twsk|inet_put_port|inet_sk_|sock_def|sock_rfree|sock_wfree|__sock_wfree|sk_free|__sk_free|sk_destruct|__sk_destruct|sk_alloc|sk_prot_alloc|sk_clone|sk_common|sock_init|sock_i_|skb_set_owner_w|sk_forced)"),
 ("skb and slab alloc/free (kmem_cache_*, kfree, __alloc_skb, skb_release_*, memcg slab hooks)", r"^(kmem_cache_|kfree|__kfree|kmalloc|__kmalloc|__alloc_skb|alloc_skb|skb_release|__skb_free|skb_free_head|consume_skb|__consume_stateless_skb|napi_skb_cache|kfree_skbmem|sk_skb_reason_drop|__build_skb|build_skb|page_frag|__page_frag|obj_cgroup|mod_objcg|refill_obj_stock|__memcg_slab|memcg_slab|___slab_alloc|__slab_alloc|__slab_free|slab_|__mod_memcg|mod_memcg|drain_obj_stock|__refill_stock|consume_obj_stock|__put_partials|get_partial|allocate_slab|put_cpu_partial|setup_object|shuffle|__free_pages|free_unref|__alloc_pages|get_page_from_freelist|rmqueue|__rmqueue|kmalloc_reserve|skb_head_from_pool|kvfree|free_pcppages|__kmem_cache|kfree_rcu|kvfree_call_rcu|__kvfree|ksize|__ksize|skb_release_data|__refill_obj_stock|memcg_account|__memcg_kmem|mem_cgroup_from_slab|__mem_cgroup|mem_cgroup_|page_counter)"),
 ("RCU callbacks and softirq-deferred freeing (rcu_*)", r"^(rcu_|__rcu_do|rcu_do_batch|rcu_core|rcu_cblist|note_gp_changes|kvfree_rcu|__call_rcu|call_rcu|rcu_segcblist|rcu_accelerate|rcu_advance|check_cb_ovld|rcu_nocb|rcu_report|rcu_sched|rcu_note|rcu_qs|rcu_gp|swake)"),
 ("scheduler, wakeups, irq-disabled time (finish_task_switch, _raw_spin_unlock_irqrestore, __schedule, try_to_wake_up, ...)", r"^(finish_task_switch|_raw_spin_unlock_irqrestore|_raw_spin_unlock_irq$|__schedule|schedule|try_to_wake_up|ttwu|__wake_up|wake_up|autoremove_wake|woken_wake|sk_wait_data|wait_woken|prepare_to_wait|finish_wait|enqueue_|dequeue_|update_curr|update_load|update_cfs|update_rq|pick_next|pick_task|pick_eevdf|put_prev|set_next|__pick|select_task_rq|sched_|psi_|__update_load|reweight|update_min_vruntime|avg_vruntime|place_entity|__enqueue|__dequeue|resched_curr|check_preempt|wakeup_preempt|native_sched_clock|sched_clock|kvm_sched_clock|pv_native_safe_halt|default_idle|do_idle|cpuidle|__cgroup_account|cgroup_rstat|cpuacct|account_|vtime|raw_spin_rq|_raw_spin_rq|update_entity|hrtick|task_tick|newidle|idle_|nohz|tick_|calc_global|__update_idle|load_balance|sched_balance|rebalance|migrate|set_task_cpu|ttwu_|task_work|__smp_call|call_function|smp_call|llist|__traceiter|arch_scale|cpu_util|update_blocked|housekeeping|ep_poll|pollwake|__pollwait|___perf_sw_event|perf_)"),
 ("syscalls, VFS, file/socket creation, user space", r"^(do_syscall_64|entry_SYSCALL|syscall_|__x64_sys|__sys_|___sys_|x64_sys_call|ksys_|vfs_|fput|__fput|fget|__fget|fdget|__fdget|fd_install|alloc_fd|file_close_fd|filp_close|close_fd|__close_fd|alloc_file|alloc_empty_file|init_file|file_init|__alloc_file|d_alloc|__d_alloc|d_instantiate|dput|__dentry_kill|dentry_free|d_set|new_inode|alloc_inode|inode_init|__destroy_inode|destroy_inode|evict|iput|sock_alloc|sock_close|__sock_release|sock_release|sock_read_iter|sock_write_iter|sock_recvmsg|sock_sendmsg|__sock_sendmsg|sock_map_fd|sock_alloc_file|security_|apparmor|selinux|bpf_lsm|rw_verify_area|fsnotify|__fsnotify|rseq|__rseq|exit_to_user_mode|irqentry|fpregs|restore_fpregs|switch_fpu|__fsnotify|mntput|mntget|get_unused_fd|put_unused_fd|__get_unused|path_|file_|fcntl|__check_object_size|check_heap_object|__virt_addr_valid|_copy_to_user|_copy_from_user|copy_user|rep_movs|__put_user|__get_user|move_addr|__sys_connect|__sys_socket|__sys_accept|do_accept|__sys_setsockopt|do_sock_setsockopt|sock_common|__audit|audit_|lockref|task_work_run|____fput|security_file|file_free|percpu_ref|__percpu_ref|kmem_cache_alloc_lru|get_random_u32|memcpy|memset|clear_bhb|__memcpy|__memset|_raw_write|strncpy|__pfx|__x86|asm_|srso|__x86_return|__x86_indirect|retbleed|entry_|error_entry|amd_|native_irq|__rdgsbase|x86_)"),
 ("time (read_tsc, ktime_get*, timers)", r"^(read_tsc|ktime_get|__ktime|hrtimer|__hrtimer|timerqueue|__mod_timer|mod_timer|del_timer|timer_|__timer|lock_timer|detach_if|internal_add_timer|enqueue_timer|calc_wheel|__run_timers|run_timer|call_timer|sk_reset_timer|sk_stop_timer|jiffies|clockevents|lapic|native_apic|apic_|kvm_clock|pvclock|tick_)"),
 ("locks and RCU read side (_raw_spin_lock*, __rcu_read_*)", r"^(_raw_spin|__raw_spin|__raw_callee_save___pv_queued_spin_unlock|queued_spin|native_queued|__pv_queued|_raw_read|_raw_write|__rcu_read|rcu_read|preempt_|__preempt|migrate_|local_bh|__local_bh_disable)"),
]
RX = [(n, re.compile(r)) for n, r in GROUPS]
def load(path):
    syms = []
    for line in open(path):
        m = re.match(r"^\s+([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if m:
            syms.append((float(m.group(1)), m.group(2), m.group(3)))
    return syms
def group(sym, kind):
    if kind == ".":
        return "syscalls, VFS, file/socket creation, user space"
    for n, r in RX:
        if r.search(sym):
            return n
    return "other"
def grouped(syms):
    g = {n: 0.0 for n, _ in GROUPS}; g["other"] = 0.0
    for pct, kind, s in syms:
        g[group(s, kind)] += pct
    return g
def main():
    args = sys.argv[1:]
    unassigned = 0; showgroup = None
    if args and args[0] == "--unassigned":
        unassigned = int(args[1]); args = args[2:]
    if args and args[0] == "--syms":
        showgroup = args[1]; args = args[2:]
    cases = []
    for a in args:
        name, rest = a.split("=", 1)
        path, rate = rest.rsplit(":", 1)
        cases.append((name, load(path), float(rate)))
    names = [n for n, _ in GROUPS] + ["other"]
    tot = {}
    for cname, syms, rate in cases:
        g = {n: 0.0 for n in names}
        for pct, kind, s in syms:
            g[group(s, kind)] += pct
        tot[cname] = g
        if unassigned:
            print(f"# {cname}: top unassigned")
            for pct, kind, s in [x for x in syms if group(x[2], x[1]) == "other"][:unassigned]:
                print(f"#   {pct:5.2f}% {s}")
        if showgroup:
            print(f"# {cname}: symbols of groups matching {showgroup!r}")
            for pct, kind, s in syms:
                if showgroup in group(s, kind) and pct >= 0.05:
                    print(f"#   {pct:5.2f}% {s}")
    hdr = "| group | " + " | ".join(f"{c} %" for c, _, _ in cases) + " | " + " | ".join(f"{c} ns/op" for c, _, _ in cases) + " |"
    print(hdr)
    print("|---|" + "---:|" * (2 * len(cases)))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{tot[c][n]:.1f}" for c, _, _ in cases) + " | " +
              " | ".join(f"{tot[c][n] / 100 * 1e9 / r:.0f}" for c, _, r in cases) + " |")
    print("| total | " + " | ".join(f"{sum(tot[c].values()):.1f}" for c, _, _ in cases) + " | " +
          " | ".join(f"{sum(tot[c].values()) / 100 * 1e9 / r:.0f}" for c, _, r in cases) + " |")
if __name__ == "__main__":
    main()
