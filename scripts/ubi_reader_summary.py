#!/usr/bin/env python3
"""What ubi-reader (jrspruitt/ubi_reader, an independent reader of Linux UBI images) sees in
raw UBI images, as one JSON object per image on stdout: every valid PEB's erase counter and
VID header, and every volume's table record, block count and the CRC-32 (zlib) and length of
its bytes as ubi-reader's own volume reader yields them (LEB 0 to its last mapped LEB, a gap
read as 0xFF). An image ubi-reader fails on gives {"path", "error"}. The nandkit tests compare this with what nandkit reads from the same images;
one process reads them all, as starting Python per image would dominate a crash sweep.

Usage: ubi_reader_summary.py IMAGE...   (run with the interpreter of .tools/ubi-reader)
"""
import json
import sys
import zlib

from ubireader.ubi import ubi as ubi_image
from ubireader.ubi_io import ubi_file
from ubireader.utils import guess_peb_size, guess_start_offset


def summary(path):
    start = guess_start_offset(path)
    peb_size = guess_peb_size(path)
    ufile = ubi_file(path, peb_size, start)
    u = ubi_image(ufile)
    blocks = []
    for num, b in sorted(u.blocks.items()):
        if not b.is_valid:
            continue
        row = {"peb": num, "ec": b.ec_hdr.ec}
        if b.vid_hdr is not None:
            row.update(vol_id=b.vid_hdr.vol_id, lnum=b.vid_hdr.lnum, sqnum=b.vid_hdr.sqnum)
        blocks.append(row)
    images = []
    for img in u.images:
        vols = {}
        for name, vol in img.volumes.items():
            crc = 0
            length = 0
            for leb in vol.reader(u):
                crc = zlib.crc32(leb, crc)
                length += len(leb)
            vols[name] = {
                "id": vol.vol_id,
                "reserved_pebs": vol.vol_rec.reserved_pebs,
                "type": vol.vol_rec.vol_type,
                "block_count": vol.block_count,
                "crc32": crc,
                "bytes": length,
            }
        images.append({"image_seq": img.image_seq, "volumes": vols})
    return {
        "path": path,
        "peb_size": peb_size,
        "leb_size": u.leb_size,
        "min_io_size": u.min_io_size,
        "blocks": blocks,
        "images": images,
    }


def main():
    for path in sys.argv[1:]:
        try:
            print(json.dumps(summary(path)))
        except Exception as e:  # ubi-reader's own failure, reported per image
            print(json.dumps({"path": path, "error": "%s: %s" % (type(e).__name__, e)}))


if __name__ == "__main__":
    main()
