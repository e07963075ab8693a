package redisstore

import "strings"

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, the part between the first '{' and the next '}' when that part
// is not empty, or of the whole key otherwise. Keys that share a slot can
// be used by one script call.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % slotCount
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
