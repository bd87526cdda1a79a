package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Where an archive keeps its segments: a directory of the data directory
// (an instance's own disk), or a NATS object store bucket, so that the
// archive of a cluster lives on the cluster, replicated as its stream is,
// and every instance reads the same one. Both hold the same names and
// bytes (archive.go), so `nats object get` gives the files a directory
// would hold.

// archiveObject is a stored object's name and size.
type archiveObject struct {
	name string
	size int64
}

// archiveStore is what an Archive needs of where it keeps segments. put is
// atomic and durable: an object under its name is whole.
type archiveStore interface {
	list() ([]archiveObject, error)
	get(name string) ([]byte, error)
	put(name string, data []byte) error
	remove(name string) error
	where() string
}

// dirStore keeps the segments as files in a directory.
type dirStore struct{ dir string }

func (d dirStore) where() string { return d.dir }

func (d dirStore) list() ([]archiveObject, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: archive: %w", err)
	}
	objs := make([]archiveObject, 0, len(ents))
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed meanwhile
			}
			return nil, fmt.Errorf("ledger: archive: %w", err)
		}
		objs = append(objs, archiveObject{name: e.Name(), size: info.Size()})
	}
	return objs, nil
}

func (d dirStore) get(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.dir, name))
}

// put writes the file under a temporary name, syncs it, renames it into
// place and syncs the directory.
func (d dirStore) put(name string, data []byte) error {
	final := filepath.Join(d.dir, name)
	if err := writeSynced(final+tmpExt, data); err != nil {
		return err
	}
	if err := os.Rename(final+tmpExt, final); err != nil {
		return fmt.Errorf("ledger: archive: %w", err)
	}
	return syncDir(d.dir)
}

func (d dirStore) remove(name string) error { return os.Remove(filepath.Join(d.dir, name)) }

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: archive: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledger: archive: write %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("ledger: archive: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("ledger: archive: sync %s: %w", dir, err)
	}
	return nil
}

// objectStore keeps the segments as objects of a JetStream object store
// bucket. An object is listed only once its last chunk and its info are
// stored, so a put is atomic; the bucket's file storage and replicas make
// it as durable as the stream.
type objectStore struct {
	obs     jetstream.ObjectStore
	bucket  string
	timeout time.Duration
}

// objectPrefix names where an archive in a bucket is.
const objectPrefix = "nats://"

func (o objectStore) where() string { return objectPrefix + o.bucket }

func (o objectStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), o.timeout)
}

func (o objectStore) list() ([]archiveObject, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	infos, err := o.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("ledger: archive %s: %w", o.where(), err)
	}
	objs := make([]archiveObject, 0, len(infos))
	for _, i := range infos {
		objs = append(objs, archiveObject{name: i.Name, size: int64(i.Size)})
	}
	return objs, nil
}

func (o objectStore) get(name string) ([]byte, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	b, err := o.obs.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("ledger: archive %s: %s: %w", o.where(), name, err)
	}
	return b, nil
}

func (o objectStore) put(name string, data []byte) error {
	ctx, cancel := o.ctx()
	defer cancel()
	if _, err := o.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("ledger: archive %s: put %s: %w", o.where(), name, err)
	}
	return nil
}

func (o objectStore) remove(name string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	return o.obs.Delete(ctx, name)
}

// OpenObjectArchive opens (making when missing, with the given replicas on
// file storage) the archive in the object store bucket of js, and removes
// what a crash while writing a segment left behind.
func OpenObjectArchive(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Archive, error) {
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "turnledger archive of events below the retention horizon (docs/retention.md)",
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: archive %s%s: %w", objectPrefix, bucket, err)
	}
	a := &Archive{store: objectStore{obs: obs, bucket: bucket, timeout: 30 * time.Second}}
	return a, a.clean()
}

// ReadObjectArchive opens the archive in an existing object store bucket
// of js for reading only.
func ReadObjectArchive(ctx context.Context, js jetstream.JetStream, bucket string) (*Archive, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("ledger: archive %s%s: %w", objectPrefix, bucket, err)
	}
	return &Archive{store: objectStore{obs: obs, bucket: bucket, timeout: 30 * time.Second}}, nil
}

// IsObjectArchive reports whether where (an archive's Where, or a flag's
// value) names an object store bucket, and which.
func IsObjectArchive(where string) (bucket string, ok bool) {
	return strings.CutPrefix(where, objectPrefix)
}
