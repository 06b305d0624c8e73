package spool

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The record header, little-endian:
//
//	offset 0  magic   2 bytes  0xF3 0xA5
//	offset 2  version 1 byte   1
//	offset 3  flags   1 byte   0 (no flag is defined; any other value is corruption)
//	offset 4  len     u32      payload length in bytes
//	offset 8  crc     u32      CRC-32C (Castagnoli) over seq ‖ payload
//	offset 12 seq     u64      the record's sequence number
//	offset 20 payload len bytes
const (
	headerSize = 20
	magic0     = 0xF3
	magic1     = 0xA5
	version    = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode appends one record to dst.
func encode(dst []byte, seq uint64, payload []byte) []byte {
	var h [headerSize]byte
	h[0], h[1], h[2], h[3] = magic0, magic1, version, 0
	binary.LittleEndian.PutUint32(h[4:8], uint32(len(payload)))
	binary.LittleEndian.PutUint64(h[12:20], seq)
	c := crc32.Update(0, castagnoli, h[12:20])
	c = crc32.Update(c, castagnoli, payload)
	binary.LittleEndian.PutUint32(h[8:12], c)
	return append(append(dst, h[:]...), payload...)
}

// decodeStatus says what decode found at an offset.
type decodeStatus int

const (
	// recordOK: a whole record with a matching checksum.
	recordOK decodeStatus = iota
	// recordShort: the bytes end inside the header or the payload.
	recordShort
	// recordBad: a header that is no record header, a length past the limit, or a
	// checksum that does not match.
	recordBad
)

// decode reads the record at the start of b. maxPayload bounds len before anything is
// read, so a huge len field costs nothing.
func decode(b []byte, maxPayload int) (seq uint64, payload []byte, status decodeStatus) {
	if len(b) < headerSize {
		if !prefixCouldBeHeader(b) {
			return 0, nil, recordBad
		}
		return 0, nil, recordShort
	}
	if b[0] != magic0 || b[1] != magic1 || b[2] != version || b[3] != 0 {
		return 0, nil, recordBad
	}
	n := binary.LittleEndian.Uint32(b[4:8])
	if uint64(n) > uint64(maxPayload) {
		return 0, nil, recordBad
	}
	seq = binary.LittleEndian.Uint64(b[12:20])
	if uint64(len(b)-headerSize) < uint64(n) {
		return seq, nil, recordShort
	}
	payload = b[headerSize : headerSize+int(n)]
	c := crc32.Update(0, castagnoli, b[12:20])
	c = crc32.Update(c, castagnoli, payload)
	if c != binary.LittleEndian.Uint32(b[8:12]) {
		return seq, nil, recordBad
	}
	return seq, payload, recordOK
}

// prefixCouldBeHeader is false when the few bytes left already cannot start a header.
func prefixCouldBeHeader(b []byte) bool {
	want := [4]byte{magic0, magic1, version, 0}
	for i := 0; i < len(b) && i < len(want); i++ {
		if b[i] != want[i] {
			return false
		}
	}
	return true
}

// segmentName is the file name of the segment whose first record has seq first.
func segmentName(first uint64) string { return fmt.Sprintf("seg-%016x.log", first) }

// parseSegmentName is the first seq a segment file name carries; ok is false for any
// other name.
func parseSegmentName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, "seg-")
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, ".log")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// The cursor file is one line: "ferrofed-spool-cursor 1 <watermark> <crc32c hex>\n",
// the checksum taken over the text before it.
const cursorPrefix = "ferrofed-spool-cursor 1 "

func encodeCursor(watermark uint64) []byte {
	body := cursorPrefix + strconv.FormatUint(watermark, 10)
	return fmt.Appendf(nil, "%s %08x\n", body, crc32.Checksum([]byte(body), castagnoli))
}

func decodeCursor(b []byte) (uint64, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return 0, fmt.Errorf("no newline at its end")
	}
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return 0, fmt.Errorf("no checksum")
	}
	body, sum := s[:i], s[i+1:]
	want, err := strconv.ParseUint(sum, 16, 32)
	if err != nil || len(sum) != 8 {
		return 0, fmt.Errorf("checksum %q is no 8-digit hex number", sum)
	}
	if uint32(want) != crc32.Checksum([]byte(body), castagnoli) {
		return 0, fmt.Errorf("checksum mismatch")
	}
	num, ok := strings.CutPrefix(body, cursorPrefix)
	if !ok {
		return 0, fmt.Errorf("not a version-1 cursor")
	}
	w, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("watermark %q: %w", num, err)
	}
	return w, nil
}
