package nat

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The datapath updates an SCTP packet's CRC32c across a port rewrite
// with a table of x^(8 n 16^j) mod P (bpf/cubes/nat/sctp.h). Its packet
// rows (pkg/datapath's TestSCTP*) reach only the lengths BPF_PROG_RUN
// takes (a page); this test checks every entry of the table, and the
// update itself over every length up to 65535 (jumbo frames included),
// against hash/crc32.

const crc32cPoly = 0x82F63B78

// mulmod and xpow are the C's crc32c_mul and the table's definition.
func mulmod(a, b uint32) uint32 {
	var p uint32
	for i := 0; i < 32; i++ {
		p ^= b & -((a >> (31 - i)) & 1)
		b = (b >> 1) ^ (crc32cPoly & -(b & 1))
	}
	return p
}

func xpow(k int) uint32 {
	p := uint32(0x80000000)
	for range k {
		p = (p >> 1) ^ (crc32cPoly & -(p & 1))
	}
	return p
}

// headerTable reads sctp_crc_x8n from the C header.
func headerTable(t *testing.T) [4][16]uint32 {
	src, err := os.ReadFile("../../../bpf/cubes/nat/sctp.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)sctp_crc_x8n\[4\]\[16\] = \{(.*?)\};`).FindSubmatch(src)
	if body == nil {
		t.Fatal("sctp_crc_x8n not found in sctp.h")
	}
	words := regexp.MustCompile(`0x[0-9a-fA-F]{8}`).FindAll(body[1], -1)
	if len(words) != 64 {
		t.Fatalf("sctp_crc_x8n has %d entries, want 64", len(words))
	}
	var tab [4][16]uint32
	for i, w := range words {
		v, _ := strconv.ParseUint(string(w[2:]), 16, 32)
		tab[i/16][i%16] = uint32(v)
	}
	return tab
}

func TestSCTPCRCTable(t *testing.T) {
	tab := headerTable(t)
	for j := range 4 {
		for n := range 16 {
			if want := xpow(8 * n << (4 * j)); tab[j][n] != want {
				t.Errorf("sctp_crc_x8n[%d][%d] = %#08x, want x^%d mod P = %#08x", j, n, tab[j][n], 8*n<<(4*j), want)
			}
		}
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	delta := func(l int, d uint32) uint32 { // sctp_crc_delta
		x := mulmod(mulmod(tab[0][l&15], tab[1][(l>>4)&15]), mulmod(tab[2][(l>>8)&15], tab[3][(l>>12)&15]))
		return mulmod(x, d)
	}
	lengths := []int{12, 16, 4095, 4096, 8192, 9000, 65535}
	for range 300 {
		lengths = append(lengths, 12+rng.IntN(65535-12))
	}
	for _, l := range lengths {
		old := make([]byte, l)
		for i := range old {
			old[i] = byte(rng.Uint32())
		}
		copy(old[8:12], []byte{0, 0, 0, 0}) // the CRC is computed with its field 0
		changed := append([]byte(nil), old...)
		binary.BigEndian.PutUint16(changed[rng.IntN(2)*2:], uint16(rng.Uint32())) // a new port
		d := binary.LittleEndian.Uint32(old) ^ binary.LittleEndian.Uint32(changed)
		if got, want := crc32.Checksum(old, castagnoli)^delta(l, d), crc32.Checksum(changed, castagnoli); got != want {
			t.Fatalf("length %d: updated CRC %#08x, recomputed %#08x", l, got, want)
		}
	}
}
