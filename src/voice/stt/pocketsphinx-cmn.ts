/**
 * Per-session cepstral mean normalisation (CMN) for shared pocketsphinx
 * decoders, used inside the pocketsphinx worker.
 *
 * pocketsphinx decodes streamed audio with *live* CMN: each frame is
 * normalised by a cepstral mean carried over from the utterances the decoder
 * heard before, and updated at each utterance's end. Decoders are shared
 * between sessions, so without this a speaker is normalised by whoever used
 * the decoder last. This module reads the decoder's mean when an
 * utterance ends (`cmn_live_get`) and puts a session's own mean back before
 * its next utterance (`cmn_live_set`), on whatever decoder it gets.
 *
 * The mean lives in sphinxbase's `cmn_t`, reached through `ps_get_feat(ps)`
 * → `feat_t.cmn_struct`. The layouts below are copied from Debian's
 * `libsphinxbase-dev` 0.8+5prealpha+1 headers (`sphinxbase/feat.h`,
 * `sphinxbase/cmn.h`; `mfcc_t` is `float32`: `FIXED_POINT` is undefined in
 * its `sphinx_config.h`), and a C program built against them gave the
 * offsets on x86-64: `feat_t.cepsize` 16, `feat_t.cmn_struct` 88
 * (`sizeof(feat_t)` 144), `cmn_t.cmn_mean` 0, `cmn_t.veclen` 28. The headers
 * are not needed at run time. Every decoder is checked when it is created
 * (13 cepstra, and the mean read back equals the model's `-cmninit`); a
 * library that does not match turns the feature off with a reason, it never
 * crashes the worker.
 */
import koffi from 'koffi';
import type { LibraryHandle } from 'koffi';

/** Cepstra per frame in the US English model (`-ceplen` 13). */
export const CMN_VECTOR_LENGTH = 13;

/** `feat_t` of sphinxbase 0.8+5prealpha (`sphinxbase/feat.h`), field for field. */
export const FEAT_T = koffi.struct({
  refcount: 'int',
  name: 'void *',
  cepsize: 'int32_t',
  n_stream: 'int32_t',
  stream_len: 'void *',
  window_size: 'int32_t',
  n_sv: 'int32_t',
  sv_len: 'void *',
  subvecs: 'void *',
  sv_buf: 'void *',
  sv_dim: 'int32_t',
  cmn: 'int', // cmn_type_t (an enum)
  varnorm: 'int32_t',
  agc: 'int', // agc_type_t (an enum)
  compute_feat: 'void *',
  cmn_struct: 'void *',
  agc_struct: 'void *',
  cepbuf: 'void *',
  tmpcepbuf: 'void *',
  bufpos: 'int32_t',
  curpos: 'int32_t',
  lda: 'void *',
  n_lda: 'uint32_t',
  out_dim: 'uint32_t',
});

/** `cmn_t` of sphinxbase 0.8+5prealpha (`sphinxbase/cmn.h`). */
export const CMN_T = koffi.struct({
  cmn_mean: 'void *',
  cmn_var: 'void *',
  sum: 'void *',
  nframe: 'int32_t',
  veclen: 'int32_t',
});

/** Reads and writes a decoder's live CMN mean; made by {@link bindCmn}. */
export interface CmnAccess {
  /** The decoder's `cmn_t`, or why per-session CMN cannot be used with it. */
  check(ps: unknown): { cmn: unknown } | { error: string };
  get(cmn: unknown): Float32Array;
  set(cmn: unknown, mean: Float32Array): void;
}

/**
 * Binds the functions per-session CMN needs, or says why it cannot work
 * with this library (a symbol missing).
 */
export function bindCmn(lib: LibraryHandle): CmnAccess | { error: string } {
  type Fn = ReturnType<LibraryHandle['func']>;
  let psGetFeat: Fn;
  let psGetConfig: Fn;
  let cmdLnStr: Fn;
  let cmnLiveGet: Fn;
  let cmnLiveSet: Fn;
  try {
    psGetFeat = lib.func('void *ps_get_feat(void *ps)');
    psGetConfig = lib.func('void *ps_get_config(void *ps)');
    cmdLnStr = lib.func('const char *cmd_ln_str_r(void *config, const char *name)');
    cmnLiveGet = lib.func('void cmn_live_get(void *cmn, _Out_ float *vec)');
    cmnLiveSet = lib.func('void cmn_live_set(void *cmn, const float *vec)');
  } catch (err) {
    return { error: `the library lacks a function it needs: ${(err as Error).message}` };
  }
  const get = (cmn: unknown): Float32Array => {
    const vec = new Float32Array(CMN_VECTOR_LENGTH);
    cmnLiveGet(cmn, vec);
    return vec;
  };
  return {
    check(ps) {
      const feat = psGetFeat(ps) as unknown;
      if (!feat) return { error: 'ps_get_feat gave no feature computation' };
      const f = koffi.decode(feat, FEAT_T) as { cepsize: number; cmn_struct: unknown };
      if (f.cepsize !== CMN_VECTOR_LENGTH) {
        return { error: `feat_t.cepsize reads ${f.cepsize}, expected ${CMN_VECTOR_LENGTH}` };
      }
      if (!f.cmn_struct) return { error: 'feat_t.cmn_struct is NULL (no CMN in this model)' };
      const c = koffi.decode(f.cmn_struct, CMN_T) as { veclen: number };
      if (c.veclen !== CMN_VECTOR_LENGTH) {
        return { error: `cmn_t.veclen reads ${c.veclen}, expected ${CMN_VECTOR_LENGTH}` };
      }
      // Right after ps_init the mean is the model's -cmninit (acmod copies it in).
      const init = (cmdLnStr(psGetConfig(ps), '-cmninit') as string | null) ?? '';
      const expected = parseCmnInit(init);
      const mean = get(f.cmn_struct);
      const off = expected.findIndex((v, i) => Math.abs(v - mean[i]!) > 1e-3);
      if (off !== -1) {
        return {
          error: `the CMN mean read back (${[...mean].map((v) => v.toFixed(2)).join(',')}) is not the model's -cmninit (${init})`,
        };
      }
      return { cmn: f.cmn_struct };
    },
    get,
    set: (cmn, mean) => void cmnLiveSet(cmn, mean),
  };
}

/** `-cmninit`'s comma-separated values, padded with zeros to 13 as acmod does. */
export function parseCmnInit(text: string): Float32Array {
  const out = new Float32Array(CMN_VECTOR_LENGTH);
  text
    .split(',')
    .slice(0, CMN_VECTOR_LENGTH)
    .forEach((v, i) => (out[i] = Number.parseFloat(v) || 0));
  return out;
}
