/**
 * The WASI calls Flite's program makes, served from memory: the program sees
 * one directory (`.`) whose files live in {@link FliteWasiShim.files}; the
 * text goes in as `in.txt` and the speech comes out as `out.wav`.
 *
 * Node's own `node:wasi` would need real files, and in Node 20 its objects,
 * collected after many runs, can abort the process. Flite needs only these
 * thirteen calls.
 *
 * Plain JavaScript: it runs inside flite-worker.mjs.
 */
import { TextDecoder, TextEncoder } from 'node:util';

/** WASI error numbers. */
const ERRNO = { SUCCESS: 0, BADF: 8, INVAL: 28, NOENT: 44 };
/** The preopened directory's file descriptor (the first after stdio). */
const DIR_FD = 3;
/** WASI file types. */
const FILETYPE = { CHARACTER_DEVICE: 2, DIRECTORY: 3, REGULAR_FILE: 4 };

/** Thrown by `proc_exit` to leave `_start`; `code` is the exit status. */
export class FliteExit {
  constructor(/** @type {number} */ code) {
    this.code = code;
  }
}

/** One run's WASI world: arguments, files, open descriptors. */
export class FliteWasiShim {
  /** @type {string[]} */ args = [];
  /** @type {Map<string, Uint8Array>} */ files = new Map();
  /** @type {Map<number, { name: string, pos: number }>} */ #open = new Map();
  /** @type {WebAssembly.Memory | undefined} */ memory;
  #nextFd = DIR_FD + 1;

  #view() {
    return new DataView(/** @type {WebAssembly.Memory} */ (this.memory).buffer);
  }

  #bytes() {
    return new Uint8Array(/** @type {WebAssembly.Memory} */ (this.memory).buffer);
  }

  #count(/** @type {number} */ ptr, /** @type {number} */ count) {
    this.#view().setUint32(ptr, count, true);
    return ERRNO.SUCCESS;
  }

  /** Reads an iovec array: [pointer, length] pairs. */
  #iovs(/** @type {number} */ ptr, /** @type {number} */ count) {
    const v = this.#view();
    const out = [];
    for (let i = 0; i < count; i++) {
      out.push([v.getUint32(ptr + 8 * i, true), v.getUint32(ptr + 8 * i + 4, true)]);
    }
    return out;
  }

  /** Writes `bytes` into the open file at its position, growing it. */
  #write(/** @type {{ name: string, pos: number }} */ file, /** @type {Uint8Array} */ bytes) {
    const data = /** @type {Uint8Array} */ (this.files.get(file.name));
    const end = file.pos + bytes.length;
    let out = data;
    if (end > data.length) {
      out = new Uint8Array(end);
      out.set(data);
    }
    out.set(bytes, file.pos);
    this.files.set(file.name, out);
    file.pos = end;
  }

  /** The import object for `wasi_snapshot_preview1`. */
  imports() {
    const encoder = new TextEncoder();
    const encoded = () => this.args.map((a) => encoder.encode(a));
    return {
      args_sizes_get: (/** @type {number} */ countPtr, /** @type {number} */ sizePtr) => {
        const args = encoded();
        this.#view().setUint32(countPtr, args.length, true);
        return this.#count(
          sizePtr,
          args.reduce((n, a) => n + a.length + 1, 0),
        );
      },
      args_get: (/** @type {number} */ argvPtr, /** @type {number} */ bufPtr) => {
        const v = this.#view();
        const b = this.#bytes();
        let at = bufPtr;
        encoded().forEach((arg, i) => {
          v.setUint32(argvPtr + 4 * i, at, true);
          b.set(arg, at);
          b[at + arg.length] = 0;
          at += arg.length + 1;
        });
        return ERRNO.SUCCESS;
      },
      clock_time_get: (
        /** @type {number} */ _id,
        /** @type {bigint} */ _p,
        /** @type {number} */ out,
      ) => {
        this.#view().setBigUint64(out, process.hrtime.bigint(), true);
        return ERRNO.SUCCESS;
      },
      fd_prestat_get: (/** @type {number} */ fd, /** @type {number} */ out) => {
        if (fd !== DIR_FD) return ERRNO.BADF;
        this.#view().setUint8(out, 0); // a directory…
        return this.#count(out + 4, 1); // …whose name, ".", is one byte
      },
      fd_prestat_dir_name: (
        /** @type {number} */ fd,
        /** @type {number} */ ptr,
        /** @type {number} */ length,
      ) => {
        if (fd !== DIR_FD) return ERRNO.BADF;
        if (length >= 1) this.#bytes()[ptr] = 0x2e;
        return ERRNO.SUCCESS;
      },
      fd_fdstat_get: (/** @type {number} */ fd, /** @type {number} */ out) => {
        let type = FILETYPE.CHARACTER_DEVICE;
        if (fd === DIR_FD) type = FILETYPE.DIRECTORY;
        else if (this.#open.has(fd)) type = FILETYPE.REGULAR_FILE;
        else if (fd > 2) return ERRNO.BADF;
        const v = this.#view();
        v.setUint8(out, type);
        v.setUint16(out + 2, 0, true);
        v.setBigUint64(out + 8, 0xffff_ffffn, true);
        v.setBigUint64(out + 16, 0xffff_ffffn, true);
        return ERRNO.SUCCESS;
      },
      fd_fdstat_set_flags: () => ERRNO.SUCCESS,
      path_open: (
        /** @type {number} */ dirFd,
        /** @type {number} */ _dirFlags,
        /** @type {number} */ pathPtr,
        /** @type {number} */ pathLength,
        /** @type {number} */ openFlags,
        /** @type {bigint} */ _rightsBase,
        /** @type {bigint} */ _rightsInheriting,
        /** @type {number} */ _fdFlags,
        /** @type {number} */ fdPtr,
      ) => {
        if (dirFd !== DIR_FD) return ERRNO.BADF;
        const name = new TextDecoder().decode(this.#bytes().slice(pathPtr, pathPtr + pathLength));
        const create = (openFlags & 1) !== 0;
        const truncate = (openFlags & 8) !== 0;
        if (!this.files.has(name) && !create) return ERRNO.NOENT;
        if (!this.files.has(name) || truncate) this.files.set(name, new Uint8Array(0));
        const fd = this.#nextFd++;
        this.#open.set(fd, { name, pos: 0 });
        return this.#count(fdPtr, fd);
      },
      fd_read: (
        /** @type {number} */ fd,
        /** @type {number} */ iovs,
        /** @type {number} */ n,
        /** @type {number} */ readPtr,
      ) => {
        const file = this.#open.get(fd);
        if (file === undefined) return fd === 0 ? this.#count(readPtr, 0) : ERRNO.BADF;
        const data = /** @type {Uint8Array} */ (this.files.get(file.name));
        const b = this.#bytes();
        let total = 0;
        for (const [ptr, length] of this.#iovs(iovs, n)) {
          const piece = data.subarray(file.pos, file.pos + length);
          b.set(piece, ptr);
          file.pos += piece.length;
          total += piece.length;
          if (piece.length < length) break;
        }
        return this.#count(readPtr, total);
      },
      fd_write: (
        /** @type {number} */ fd,
        /** @type {number} */ iovs,
        /** @type {number} */ n,
        /** @type {number} */ writtenPtr,
      ) => {
        const file = this.#open.get(fd);
        if (file === undefined && fd > 2) return ERRNO.BADF;
        const b = this.#bytes();
        let total = 0;
        for (const [ptr, length] of this.#iovs(iovs, n)) {
          // stdout and stderr (usage text, warnings) are not needed.
          if (file !== undefined) this.#write(file, b.slice(ptr, ptr + length));
          total += length;
        }
        return this.#count(writtenPtr, total);
      },
      fd_seek: (
        /** @type {number} */ fd,
        /** @type {bigint} */ offset,
        /** @type {number} */ whence,
        /** @type {number} */ out,
      ) => {
        const file = this.#open.get(fd);
        if (file === undefined) return ERRNO.BADF;
        const size = this.files.get(file.name)?.length ?? 0;
        const base = whence === 0 ? 0 : whence === 1 ? file.pos : whence === 2 ? size : -1;
        const pos = base + Number(offset);
        if (base < 0 || pos < 0) return ERRNO.INVAL;
        file.pos = pos;
        this.#view().setBigUint64(out, BigInt(pos), true);
        return ERRNO.SUCCESS;
      },
      fd_close: (/** @type {number} */ fd) => {
        this.#open.delete(fd);
        return ERRNO.SUCCESS;
      },
      proc_exit: (/** @type {number} */ code) => {
        throw new FliteExit(code);
      },
    };
  }
}
