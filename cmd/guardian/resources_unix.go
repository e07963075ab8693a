//go:build unix

package main

import (
	"runtime"
	"syscall"
	"time"
)

// resources is what the process used so far, from getrusage(2).
func resources() usedResources {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usedResources{}
	}
	peak := int64(ru.Maxrss) * 1024 // KiB on Linux and the BSDs
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		peak = int64(ru.Maxrss) // bytes there
	}
	return usedResources{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), peak: peak}
}
