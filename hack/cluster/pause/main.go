// Command pause is the local cluster's pod sandbox process (the role of
// registry.k8s.io/pause): as PID 1 of the pod it holds the namespaces, reaps orphaned
// children, and exits on SIGTERM or SIGINT. Built statically (CGO_ENABLED=0) and put in
// an image by hack/image, so no image is ever pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
