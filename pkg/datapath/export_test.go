package datapath

// AttachPodTCX attaches a pod as agents did before the tc filters: tcx
// links, pinned (an upgrade's starting point).
func (d *Datapath) AttachPodTCX(ifname string, ifindex int) error {
	return d.attachTCX(podLinkPrefix+ifname, ifname, ifindex, d.objs.FromPod, d.objs.ToPod)
}
