#!/usr/bin/env python3
# oci-image.py ROOTFS NAME OUT.tar: an OCI image archive (oci-layout, index.json, blobs) of
# one uncompressed layer holding the directory ROOTFS, named NAME for containerd's
# `ctr image import` (the io.containerd.image.name annotation) and for tools that read the
# OCI ref name. Built by the runtime tests: no registry is reachable here. The same rootfs
# gives the same bytes (sorted entries, fixed times and owners).
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_tar(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, os.path.relpath(path, rootfs))
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = 'root'
                if info.isfile():
                    with open(path, 'rb') as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main():
    if len(sys.argv) != 4:
        sys.exit('usage: oci-image.py ROOTFS NAME OUT.tar')
    rootfs, name, out = sys.argv[1:]
    blobs = {}

    def blob(data, media_type):
        digest = 'sha256:' + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {'mediaType': media_type, 'digest': digest, 'size': len(data)}

    layer = blob(layer_tar(rootfs), 'application/vnd.oci.image.layer.v1.tar')
    config = blob(json.dumps({
        'architecture': 'amd64', 'os': 'linux',
        'config': {'Env': ['PATH=/bin'], 'Cmd': ['/bin/sh'], 'WorkingDir': '/'},
        'rootfs': {'type': 'layers', 'diff_ids': [layer['digest']]},
    }, sort_keys=True).encode(), 'application/vnd.oci.image.config.v1+json')
    manifest = blob(json.dumps({
        'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
        'config': config, 'layers': [layer],
    }, sort_keys=True).encode(), 'application/vnd.oci.image.manifest.v1+json')
    manifest['annotations'] = {'io.containerd.image.name': name,
                               'org.opencontainers.image.ref.name': name.rsplit(':', 1)[-1]}
    index = {'schemaVersion': 2, 'manifests': [manifest]}
    files = [('oci-layout', json.dumps({'imageLayoutVersion': '1.0.0'}).encode()),
             ('index.json', json.dumps(index, sort_keys=True).encode())]
    files += [('blobs/sha256/' + d.split(':')[1], data) for d, data in sorted(blobs.items())]
    with tarfile.open(out, 'w', format=tarfile.PAX_FORMAT) as tar:
        for dname in ('blobs', 'blobs/sha256'):
            info = tarfile.TarInfo(dname)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for fname, data in files:
            info = tarfile.TarInfo(fname)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


if __name__ == '__main__':
    main()
