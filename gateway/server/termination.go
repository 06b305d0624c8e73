package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// TerminationMessageTimeout bounds the write of the termination message: a file that
// does not answer (a FIFO nobody reads, a hung network file system) costs the drain at
// most this, out of the headroom the push and the exit share.
const TerminationMessageTimeout = time.Second

// terminationMessageKey names the configuration key in what the write logs.
const terminationMessageKey = "server.termination_message_path"

// writeTerminationMessage writes m, one line, to path (server.termination_message_path),
// creating or truncating the file, so that the kubelet copies it into the pod's status.
// An empty path writes nothing. Nothing here fails the drain: a directory that does not
// exist (no such file system outside Kubernetes) skips the message, and any other
// failure, or a write that does not finish within TerminationMessageTimeout, is logged
// once, naming the key, and the drain goes on.
func (s *Server) writeTerminationMessage(path string, m lifecycle.TerminationMessage) {
	if path == "" {
		return
	}
	line, err := m.Marshal()
	if err != nil {
		s.log.Error(err, "Wrote no termination message: the drain's outcome does not make one", "key", terminationMessageKey, "path", path)
		return
	}
	line = append(line, '\n')
	done := make(chan error, 1)
	go func() { done <- writeFileTruncating(path, line) }()
	select {
	case err = <-done:
	case <-time.After(TerminationMessageTimeout):
		err = fmt.Errorf("the write did not finish within %s", TerminationMessageTimeout)
	}
	switch {
	case err == nil:
		s.log.Info("Wrote the drain's outcome to "+terminationMessageKey, "key", terminationMessageKey, "path", path,
			"message", string(line[:len(line)-1]))
	case errors.Is(err, fs.ErrNotExist):
		s.log.Info("Skipped the termination message: its directory does not exist", "key", terminationMessageKey, "path", path,
			"directory", filepath.Dir(path), "error", err.Error())
	default:
		s.log.Error(err, "Could not write the termination message: the drain's outcome is in this log only",
			"key", terminationMessageKey, "path", path)
	}
}

// writeFileTruncating creates or truncates path and writes data to it.
func writeFileTruncating(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
