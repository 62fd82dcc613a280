// The convolution and recurrent kernels against plain loops and formulas in double: channels-last
// depthwise convolution, Winograd F(2×2, 3×3), and the LSTM and GRU cell updates.
#include "kernels_check.h"

// The channels-last depthwise convolution against a plain loop, on windows that cross every edge:
// 3×3 and 5×5 (the register spans), 1×1, 7×1 and dilated ones (the general path), strides 1 and 2,
// channel counts with and without a partial vector, rows split in two calls, every in-register
// activation and one applied after the store (tanh).
void check_dwconv_nhwc(const char *name, dw_nhwc_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    const size_t shapes[][7] = {
        // h, w, c, kh, kw, stride, dilation
        {9, 11, 16, 3, 3, 1, 1}, {9, 11, 16, 3, 3, 2, 1}, {14, 14, 48, 5, 5, 1, 1}, {7, 7, 32, 5, 5, 2, 1},
        {6, 13, 21, 3, 3, 1, 1}, {5, 5, 7, 5, 5, 1, 1}, {3, 2, 16, 5, 5, 1, 1}, {8, 9, 24, 3, 3, 1, 2},
        {5, 6, 17, 1, 1, 1, 1}, {10, 4, 40, 7, 1, 2, 1}, {1, 17, 64, 3, 3, 2, 1},
    };
    const int activations[] = {KILN_UNARY_NONE, KILN_UNARY_RELU, KILN_UNARY_HARD_SWISH, KILN_UNARY_CLIP, KILN_UNARY_SILU,
                               KILN_UNARY_SIGMOID, KILN_UNARY_TANH};
    unsigned state = 99;
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t h = shapes[s][0], w = shapes[s][1], c = shapes[s][2], kh = shapes[s][3], kw = shapes[s][4];
        const size_t st = shapes[s][5], dil = shapes[s][6];
        const size_t pt = (kh - 1) * dil / 2, pl = (kw - 1) * dil / 2;
        const size_t oh = (h + 2 * pt - (kh - 1) * dil - 1) / st + 1, ow = (w + 2 * pl - (kw - 1) * dil - 1) / st + 1;
        float *x = malloc(h * w * c * sizeof(float)), *wt = malloc(kh * kw * c * sizeof(float)), *bias = malloc(c * sizeof(float));
        float *y = malloc(oh * ow * c * sizeof(float)), *want = malloc(oh * ow * c * sizeof(float));
        for (size_t i = 0; i < h * w * c; i++) x[i] = value(&state) * 3;
        for (size_t i = 0; i < kh * kw * c; i++) wt[i] = value(&state);
        for (size_t i = 0; i < c; i++) bias[i] = value(&state);
        for (size_t a = 0; a < sizeof activations / sizeof activations[0]; a++) {
            const kiln_epilogue e = {a % 2 ? NULL : bias, activations[a], 0.0f, 6.0f, NULL, 0};
            for (size_t oy = 0; oy < oh; oy++) {
                for (size_t ox = 0; ox < ow; ox++) {
                    for (size_t ch = 0; ch < c; ch++) {
                        double sum = e.bias ? e.bias[ch] : 0;
                        for (size_t ky = 0; ky < kh; ky++) {
                            for (size_t kx = 0; kx < kw; kx++) {
                                const long iy = (long)(oy * st + ky * dil) - (long)pt, ix = (long)(ox * st + kx * dil) - (long)pl;
                                if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w) continue;
                                sum += (double)x[((size_t)iy * w + (size_t)ix) * c + ch] * wt[(ky * kw + kx) * c + ch];
                            }
                        }
                        want[(oy * ow + ox) * c + ch] = (float)sum;
                    }
                }
            }
            kiln_unary_apply(e.activation, oh * ow * c, want, want, e.alpha, e.beta, 1);
            for (size_t i = 0; i < oh * ow * c; i++) y[i] = NAN;
            const size_t mid = oh / 2;
            fn(h, w, c, x, kh, kw, wt, st, st, dil, dil, pt, pl, oh, ow, 0, mid, 0, c, y, &e);
            fn(h, w, c, x, kh, kw, wt, st, st, dil, dil, pt, pl, oh, ow, mid, oh, 0, c, y, &e);
            cases++;
            for (size_t i = 0; i < oh * ow * c; i++) {
                if (!(fabsf(y[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]))) {
                    failures++;
                    if (bad++ < 5)
                        printf("%s %zux%zux%zu %zux%zu s%zu d%zu act %d: y[%zu] = %g, want %g\n", name, h, w, c, kh, kw, st, dil,
                               e.activation, i, y[i], want[i]);
                    break;
                }
            }
        }
        free(x), free(wt), free(bias), free(y), free(want);
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}

// Winograd F(2×2, 3×3) against a direct convolution in double: odd map sizes (partial tiles at the
// bottom and right), pads 1 and 0, channel counts off the panel width, blocks smaller than the tile
// count, a panel range split in two calls, bias, a residual already in the output, an activation,
// and pixels written into a wider row (a concat's slice).
void check_winograd(const char *ukernel, int isa) {
    size_t kmr = 0, knr = 0;
    kiln_f32_gemm_ukernel fn = kiln_f32_gemm_ukernel_named(ukernel, &kmr, &knr);
    if (!fn) {
        printf("skipped Winograd on %s: this CPU lacks its features\n", ukernel);
        return;
    }
    const size_t shapes[][6] = {
        // h, w, c, m, pad, block
        {9, 11, 16, 40, 1, 8}, {6, 7, 24, 33, 0, 5}, {5, 5, 64, 64, 1, 16}, {1, 4, 17, 9, 1, 3}, {12, 3, 8, 70, 1, 64},
        {11, 13, 40, 17, 0, 30},
    };
    const double g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    unsigned state = 7;
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t h = shapes[s][0], w = shapes[s][1], c = shapes[s][2], m = shapes[s][3], pad = shapes[s][4], block = shapes[s][5];
        const size_t oh = h + 2 * pad - 2, ow = w + 2 * pad - 2, ldc = m + 3, panels = (m + knr - 1) / knr;
        const size_t tiles = (oh + 1) / 2 * ((ow + 1) / 2);
        float *x = malloc(h * w * c * sizeof(float)), *wt = malloc(m * c * 9 * sizeof(float)), *bias = malloc(m * sizeof(float));
        float *y = malloc(oh * ow * ldc * sizeof(float)), *want = malloc(oh * ow * ldc * sizeof(float));
        float *u = malloc(16 * panels * c * knr * sizeof(float)), *dense = malloc(c * m * sizeof(float));
        float *scratch = malloc(kiln_f32_winograd_scratch_floats(c, m, block > tiles ? block : tiles) * sizeof(float));
        for (size_t i = 0; i < h * w * c; i++) x[i] = value(&state) * 2;
        for (size_t i = 0; i < m * c * 9; i++) wt[i] = value(&state);
        for (size_t i = 0; i < m; i++) bias[i] = value(&state);
        kiln_packed_b b[16];
        for (int xi = 0; xi < 16; xi++) {
            const int i = xi / 4, j = xi % 4;
            for (size_t ch = 0; ch < c; ch++)
                for (size_t n = 0; n < m; n++) {
                    double sum = 0;
                    for (int a = 0; a < 3; a++)
                        for (int q = 0; q < 3; q++) sum += g[i][a] * wt[((n * c + ch) * 3 + (size_t)a) * 3 + (size_t)q] * g[j][q];
                    dense[ch * m + n] = (float)sum;
                }
            kiln_f32_pack_b(c, m, knr, dense, m, 1, u + (size_t)xi * panels * c * knr);
            b[xi] = (kiln_packed_b){0};
            b[xi].kind = KILN_B_F32, b[xi].k = c, b[xi].n = m, b[xi].nr = knr, b[xi].data = u + (size_t)xi * panels * c * knr;
        }
        for (int variant = 0; variant < 3; variant++) {
            // 0: bias and relu; 1: bias, residual and hard swish; 2: as 1, one call per panel.
            const kiln_epilogue e = {bias, variant ? KILN_UNARY_HARD_SWISH : KILN_UNARY_RELU, 0, 0, NULL, variant > 0};
            for (size_t i = 0; i < oh * ow * ldc; i++) y[i] = want[i] = variant ? value(&state) : NAN;
            for (size_t oy = 0; oy < oh; oy++)
                for (size_t ox = 0; ox < ow; ox++) {
                    float *o = want + (oy * ow + ox) * ldc;
                    for (size_t n = 0; n < m; n++) {
                        double sum = bias[n] + (variant ? o[n] : 0);
                        for (size_t ky = 0; ky < 3; ky++)
                            for (size_t kx = 0; kx < 3; kx++) {
                                const long iy = (long)(oy + ky) - (long)pad, ix = (long)(ox + kx) - (long)pad;
                                if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w) continue;
                                for (size_t ch = 0; ch < c; ch++)
                                    sum += (double)x[((size_t)iy * w + (size_t)ix) * c + ch] * wt[((n * c + ch) * 3 + ky) * 3 + kx];
                            }
                        o[n] = (float)sum;
                    }
                    kiln_unary_apply(e.activation, m, o, o, 0, 0, 1);
                }
            const size_t half = panels / 2;
            const kiln_f32_winograd_fn winograd = kiln_vector_config_of(isa)->winograd;
            if (variant == 2) {
                for (size_t p = 0; p < panels; p++)
                    winograd(fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles, p, p + 1, tiles, &e, scratch);
            } else {
                winograd(fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles, 0, half, block, &e, scratch);
                winograd(fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles / 2, half, panels, block, &e, scratch);
                winograd(fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, tiles / 2, tiles, half, panels, block, &e, scratch);
            }
            cases++;
            for (size_t i = 0; i < oh * ow * ldc; i++) {
                const int gap = i % ldc >= m;
                if (gap ? !(isnan(y[i]) == isnan(want[i]) && (isnan(y[i]) || y[i] == want[i]))
                        : !(fabsf(y[i] - want[i]) <= 2e-5f * (1 + fabsf(want[i])))) {
                    failures++;
                    if (bad++ < 5) printf("Winograd on %s, %zux%zux%zu→%zu pad %zu variant %d: y[%zu] = %g, want %g\n", ukernel, h, w, c, m, pad,
                                          variant, i, y[i], want[i]);
                    break;
                }
            }
        }
        free(x), free(wt), free(bias), free(y), free(want), free(u), free(dense), free(scratch);
    }
    printf("Winograd on %s: %s\n", ukernel, bad ? "MISMATCH" : "matches the reference");
}

// The LSTM cell update against the formula in double, with and without peepholes, on pre-activations
// up to ±40 (saturated gates) and a hidden size off every vector width.
void check_lstm_gates(const char *name, lstm_gates_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    enum { H = 37 };
    unsigned state = 11;
    int bad = 0;
    for (int peeped = 0; peeped < 2; peeped++) {
        float xw[4 * H], hr[4 * H], peep[3 * H], c[H], h[H];
        double wc[H], wh[H];
        for (int j = 0; j < 4 * H; j++) xw[j] = value(&state) * 20, hr[j] = value(&state) * 20;
        for (int j = 0; j < 3 * H; j++) peep[j] = value(&state);
        for (int j = 0; j < H; j++) c[j] = value(&state) * 2;
        for (int j = 0; j < H; j++) {
            const double pi = peeped ? peep[j] : 0, po = peeped ? peep[H + j] : 0, pf = peeped ? peep[2 * H + j] : 0;
            const double i = 1 / (1 + exp(-((double)xw[j] + hr[j] + pi * c[j])));
            const double f = 1 / (1 + exp(-((double)xw[2 * H + j] + hr[2 * H + j] + pf * c[j])));
            const double g = tanh((double)xw[3 * H + j] + hr[3 * H + j]);
            wc[j] = f * c[j] + i * g;
            wh[j] = 1 / (1 + exp(-((double)xw[H + j] + hr[H + j] + po * wc[j]))) * tanh(wc[j]);
        }
        fn(H, xw, hr, peeped ? peep : NULL, c, h);
        cases++;
        for (int j = 0; j < H; j++) {
            if (!(fabs(c[j] - wc[j]) <= 1e-5 * (1 + fabs(wc[j])) && fabs(h[j] - wh[j]) <= 1e-5)) {
                failures++;
                if (bad++ < 3) printf("%s peepholes %d: c[%d] = %g (want %g), h = %g (want %g)\n", name, peeped, j, c[j], wc[j], h[j], wh[j]);
            }
        }
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}

// The GRU reset product and cell update (both linear_before_reset forms) against the formulas in
// double, with gate pre-activations large enough to saturate.
void check_gru_gates(const char *name, gru_gates_fn gates, gru_reset_fn reset, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    enum { H = 37 };
    unsigned state = 13;
    int bad = 0;
    for (int lbr = 0; lbr < 2; lbr++) {
        float xw[3 * H], hr[3 * H], h[H], rh[H];
        double want[H], wantRh[H];
        for (int j = 0; j < 3 * H; j++) xw[j] = value(&state) * 20, hr[j] = value(&state) * 20;
        for (int j = 0; j < H; j++) h[j] = value(&state) * 2;
        for (int j = 0; j < H; j++) {
            const double z = 1 / (1 + exp(-((double)xw[j] + hr[j])));
            const double r = 1 / (1 + exp(-((double)xw[H + j] + hr[H + j])));
            wantRh[j] = r * h[j];
            const double pre = lbr ? (double)xw[2 * H + j] + r * hr[2 * H + j] : (double)xw[2 * H + j] + hr[2 * H + j];
            want[j] = (1 - z) * tanh(pre) + z * h[j];
        }
        reset(H, xw, hr, h, rh);
        gates(H, lbr, xw, hr, h);
        cases += 2;
        for (int j = 0; j < H; j++) {
            if (!(fabs(h[j] - want[j]) <= 1e-5 && fabs(rh[j] - wantRh[j]) <= 1e-5 * (1 + fabs(wantRh[j])))) {
                failures++;
                if (bad++ < 3) printf("%s linear_before_reset %d: h[%d] = %g (want %g), r*h = %g (want %g)\n", name, lbr, j, h[j], want[j], rh[j], wantRh[j]);
            }
        }
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}
