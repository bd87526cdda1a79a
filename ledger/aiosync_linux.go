//go:build linux

package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// aioSyncer fsyncs files through Linux's asynchronous I/O (io_submit with
// IOCB_CMD_FSYNC) and waits for them on an eventfd in the Go runtime's
// poller.
//
// A plain fsync(2) is a blocking system call: the goroutine's thread waits
// in the kernel, and its processor (one of GOMAXPROCS) stays with it until
// the runtime's monitor takes it back. The group commit fsyncs back to back
// while commands wait, so on a machine of two cores one of the two
// processors was held by an fsync a large share of the time, and the
// commands' own work waited for the other (docs/speed.md has the figures).
// With AIO the kernel runs the same fsync (vfs_fsync) on a worker of its
// own, and the goroutine waits as it waits for a socket, holding neither a
// thread nor a processor.
//
// An aioSyncer is used by one goroutine at a time (groupSync.fmu).
type aioSyncer struct {
	ctx uintptr  // the kernel's aio_context_t
	ev  *os.File // eventfd the kernel counts completions on; non-blocking, polled
	efd int      // its descriptor (ev.Fd would make it blocking)
}

// iocb is the kernel's struct iocb (include/uapi/linux/aio_abi.h), 64
// bytes; aio_key and aio_rw_flags (both 0 here) are one 64-bit word.
type iocb struct {
	data     uint64
	keyFlags uint64
	opcode   uint16
	reqprio  int16
	fildes   uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

// ioEvent is the kernel's struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

const (
	iocbCmdFsync = 2      // IOCB_CMD_FSYNC
	iocbFlagRes  = 1 << 0 // IOCB_FLAG_RESFD: count the completion on resfd
	aioMaxFiles  = 64     // files one sync submits at most; more go in turns
)

// newAIOSyncer sets up an AIO context and its eventfd, or returns an error
// where the kernel offers neither (the caller fsyncs plainly then).
func newAIOSyncer() (*aioSyncer, error) {
	var ctx uintptr
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, aioMaxFiles, uintptr(unsafe.Pointer(&ctx)), 0); errno != 0 {
		return nil, fmt.Errorf("io_setup: %w", errno)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &aioSyncer{ctx: ctx, ev: os.NewFile(uintptr(fd), "aio-completions"), efd: fd}, nil
}

// errAIOUnsupported is a submission the kernel refused as a whole (the file
// system takes no asynchronous fsync, or the context cannot take more):
// nothing was submitted.
var errAIOUnsupported = errors.New("ledger: the kernel took no asynchronous fsync of these files")

// errAIOBroken is a sync whose completions could not all be taken: what is
// left of them would be counted for the next sync's, so the aioSyncer must
// not be used again.
var errAIOBroken = errors.New("ledger: asynchronous fsync lost track of its completions")

// sync fsyncs every file and returns once all are done: nil when every
// fsync succeeded, else the first error. errAIOUnsupported means the kernel
// refused a submission whole: the caller fsyncs every file plainly;
// errAIOBroken that the aioSyncer must not be used again.
func (a *aioSyncer) sync(files []*os.File) error {
	var first error
	for len(files) > 0 {
		n := min(len(files), aioMaxFiles)
		err := a.syncBatch(files[:n])
		if errors.Is(err, errAIOUnsupported) || errors.Is(err, errAIOBroken) {
			return err
		}
		if first == nil {
			first = err
		}
		files = files[n:]
	}
	return first
}

func (a *aioSyncer) syncBatch(files []*os.File) error {
	cbs := make([]iocb, len(files))
	ptrs := make([]*iocb, len(files))
	for i, f := range files {
		cbs[i] = iocb{data: uint64(i), opcode: iocbCmdFsync, fildes: uint32(f.Fd()), flags: iocbFlagRes, resfd: uint32(a.efd)}
		ptrs[i] = &cbs[i]
	}
	r, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	if errno != 0 {
		// Nothing was submitted (EINVAL: a file that takes no asynchronous
		// fsync; EAGAIN, EBADF, ENOSYS...): the caller fsyncs plainly.
		return fmt.Errorf("%w: io_submit: %w", errAIOUnsupported, errno)
	}
	submitted := int(r)
	var first error
	if submitted < len(files) {
		first = fmt.Errorf("io_submit took %d of %d fsyncs", submitted, len(files))
	}
	// Wait for the completions of what was submitted, counted on the
	// eventfd, then take them (io_getevents does not block then).
	var buf [8]byte
	for done := 0; done < submitted; {
		if _, err := a.ev.Read(buf[:]); err != nil {
			return fmt.Errorf("%w: %w", errAIOBroken, err)
		}
		done += int(binary.NativeEndian.Uint64(buf[:]))
	}
	evs := make([]ioEvent, submitted)
	for got := 0; got < submitted; {
		r, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, uintptr(submitted-got), uintptr(submitted-got), uintptr(unsafe.Pointer(&evs[got])), 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("%w: io_getevents: %w", errAIOBroken, errno)
		}
		got += int(r)
	}
	for _, ev := range evs {
		if ev.res < 0 && first == nil {
			first = fmt.Errorf("fsync %s: %w", filepath.Base(files[ev.data].Name()), syscall.Errno(-ev.res))
		}
	}
	return first
}

// close releases the context and the eventfd.
func (a *aioSyncer) close() {
	unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
	a.ev.Close()
}
