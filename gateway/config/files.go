package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Caps of the files the configuration names, each read whole into memory.
const (
	// MaxConfigFileBytes bounds ferrofed.toml itself (a ConfigMap holds at most 1 MiB).
	MaxConfigFileBytes = 4 << 20
	// MaxPEMFileBytes bounds a certificate, a key or a CA bundle.
	MaxPEMFileBytes = 1 << 20
)

// FileError is a file of the configuration that could not be read or used: Key is
// the configuration key that names it (server.tls.key_file, consent.bearer_token_file),
// Err says what is wrong and names the file.
type FileError struct {
	Key string
	Err error
}

func (e *FileError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// fileProblem is err as a problem of its key: the message without the key, which the
// problem carries. An error that is not a *FileError is a problem of key.
func fileProblem(key string, err error) Problem {
	var fe *FileError
	if errors.As(err, &fe) {
		return Problem{Key: fe.Key, Message: fe.Err.Error()}
	}
	return Problem{Key: key, Message: err.Error()}
}

// ReadFile is the one way the gateway reads a file its configuration names (keys, key
// sets, credentials, CA bundles, the page-token key, the mCSD cache, the stored
// queries): opened without blocking, so that a named pipe with no writer cannot hang
// `config check` or serve, refused when the opened file is not a regular file (a
// symbolic link to one, as a Secret volume's keys are, is followed), and refused when
// it is larger than limit bytes. The error is a *FileError naming key and the file.
func ReadFile(key, path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever.
	// os.OpenFile adds O_CLOEXEC.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &FileError{Key: key, Err: err}
	}
	defer f.Close()
	// The opened file is checked, not the path: nothing can be swapped in between.
	fi, err := f.Stat()
	if err != nil {
		return nil, &FileError{Key: key, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s is %s, not a regular file", path, fileKind(fi.Mode()))}
	}
	if fi.Size() > limit {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s is larger than %d bytes", path, limit)}
	}
	// The size is read again through the cap: a file growing while it is read, or one
	// whose size the file system does not tell (/proc), is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &FileError{Key: key, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s is larger than %d bytes", path, limit)}
	}
	return data, nil
}

// fileKind names what a file that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// ReadCertPool reads a PEM bundle of one or more certificates (a ca_file, a
// client_ca_file) into a pool. It is the gateway's one reader of a CA bundle
// (test/layout/certpool_test.go fails on another): every error names key.
func ReadCertPool(key, path string) (*x509.CertPool, error) {
	data, err := ReadFile(key, path, MaxPEMFileBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s holds no PEM certificate", path)}
	}
	return pool, nil
}

// ReadKeyPair reads a PEM certificate (certKey names it) and its key (keyKey; the
// same file may hold both) as tls.LoadX509KeyPair does, through ReadFile. An error of
// the pair itself (a key that does not match) is certKey's.
func ReadKeyPair(certKey, certFile, keyKey, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadFile(certKey, certFile, MaxPEMFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := ReadFile(keyKey, keyFile, MaxPEMFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, &FileError{Key: certKey, Err: fmt.Errorf("%s with %s: %w", certFile, keyFile, err)}
	}
	return pair, nil
}

// dirProblem is what keeps a directory the gateway creates files in (below it, at
// sub, when sub is set) from being used, or "": the path, or the nearest folder of it
// that exists, must be a directory the process may write in. It is what serve meets
// when it creates the spool or the cache file, told without creating anything:
// `config check` must not touch a running gateway's files.
func dirProblem(dir, sub string) string {
	p := dir
	if sub != "" {
		p = filepath.Join(dir, sub)
	}
	for {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			// Missing, or below a file: the nearest folder that exists says.
			parent := filepath.Dir(p)
			if parent == p {
				return fmt.Sprintf("%s cannot be created: no folder of it exists", p)
			}
			p = parent
			continue
		case err != nil:
			return fmt.Sprintf("%s cannot be used: %v", dir, err)
		case !fi.IsDir():
			return fmt.Sprintf("%s cannot be used: %s is %s, not a directory", dir, p, fileKind(fi.Mode()))
		}
		if err := writable(p); err != nil {
			return fmt.Sprintf("%s cannot be used: %s is not writable by this process: %v", dir, p, err)
		}
		return ""
	}
}
