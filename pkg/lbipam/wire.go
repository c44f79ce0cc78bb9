package lbipam

import (
	corev1 "k8s.io/api/core/v1"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of k8s.io/api/core/v1's generated.proto (and
// apimachinery's ObjectMeta) that concerned reads.
const (
	serviceMetadata        protowire.Number = 1  // Service.metadata
	serviceSpec            protowire.Number = 2  // Service.spec
	serviceStatus          protowire.Number = 3  // Service.status
	metaFinalizers         protowire.Number = 14 // ObjectMeta.finalizers
	specType               protowire.Number = 4  // ServiceSpec.type
	statusLoadBalancer     protowire.Number = 1  // ServiceStatus.loadBalancer
	loadBalancerIngressNum protowire.Number = 1  // LoadBalancerStatus.ingress
)

// mayConcern is concerned, read from a Service's protobuf encoding
// without decoding it: the assigner's list skips the Services it rejects
// (nearly all of a large cluster's), which then cost no allocation at
// all. It rejects only what it reads as surely not concerned; an encoding
// it cannot read is kept, to be decoded (and judged) in full.
func mayConcern(encoded []byte) bool {
	concernedField := false
	ok := eachField(encoded, func(num protowire.Number, val []byte) bool {
		switch num {
		case serviceMetadata:
			concernedField = !eachField(val, func(n protowire.Number, v []byte) bool {
				return n != metaFinalizers || string(v) != CleanupFinalizer // false stops: found
			})
		case serviceSpec:
			concernedField = !eachField(val, func(n protowire.Number, v []byte) bool {
				return n != specType || string(v) != string(corev1.ServiceTypeLoadBalancer)
			})
		case serviceStatus:
			concernedField = !eachField(val, func(n protowire.Number, v []byte) bool {
				return n != statusLoadBalancer || eachField(v, func(n protowire.Number, _ []byte) bool {
					return n != loadBalancerIngressNum // an ingress entry: concerned
				})
			})
		}
		return !concernedField
	})
	return concernedField || !ok
}

// eachField hands fn each length-delimited field of a protobuf message,
// in order, skipping the others, until fn returns false. It returns false
// when fn stopped it or the message cannot be read.
func eachField(msg []byte, fn func(num protowire.Number, val []byte) bool) bool {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return false
			}
			msg = msg[n:]
			continue
		}
		val, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return false
		}
		msg = msg[n:]
		if !fn(num, val) {
			return false
		}
	}
	return true
}
