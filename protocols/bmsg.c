/* Byte messages of the idTech 1 and 2 games: strings and number kinds (bmsg.h). */
#include "protocols/bmsg.h"

#include <math.h>

/* ---- number kinds ---- */

const char *sg_bmsg_num_name(enum sg_bmsg_num kind)
{
    static const char *const names[SG_BMSG_NUM_COUNT] = {
        "u8",      "s8",      "u16",         "s16",    "s32",     "float",       "coord16",
        "coord24", "coord32", "coord_float", "angle8", "angle16", "angle_float",
    };

    return (unsigned)kind < SG_BMSG_NUM_COUNT ? names[kind] : "?";
}

static float bits_float(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

float sg_bmsg_num_value(enum sg_bmsg_num kind, uint32_t raw)
{
    switch (kind) {
    case SG_BMSG_U8:
        return (float)(raw & 0xff);
    case SG_BMSG_S8:
        return (float)(int8_t)raw;
    case SG_BMSG_U16:
        return (float)(raw & 0xffff);
    case SG_BMSG_S16:
        return (float)(int16_t)raw;
    case SG_BMSG_S32:
        return (float)(int32_t)raw;
    case SG_BMSG_FLOAT:
    case SG_BMSG_COORD_FLOAT:
    case SG_BMSG_ANGLE_FLOAT:
        return bits_float(raw);
    case SG_BMSG_COORD16:
        return (float)(int16_t)raw * (1.0f / 8);
    case SG_BMSG_COORD24:
        return (float)(int16_t)raw + (float)((raw >> 16) & 0xff) * (1.0f / 255);
    case SG_BMSG_COORD32:
        return (float)((double)(int32_t)raw * (1.0 / 16));
    case SG_BMSG_ANGLE8:
        return (float)(int8_t)raw * (360.0f / 256);
    case SG_BMSG_ANGLE16:
        return (float)(int16_t)raw * (360.0f / 65536);
    default:
        return 0.0f;
    }
}

/* Nearest integer of `v`, clamped to [lo, hi]; NaN gives 0. */
static int64_t round_clamp(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    v = nearbyint(v);
    if (v < lo)
        v = lo;
    if (v > hi)
        v = hi;
    return (int64_t)v;
}

/* Nearest step of an angle, wrapped to `steps` (a power of two). */
static uint32_t angle_steps(double degrees, double steps)
{
    double v;

    if (!isfinite(degrees))
        return 0;
    v = nearbyint(fmod(degrees, 360.0) * steps / 360.0); /* |v| <= steps */
    return (uint32_t)(int64_t)v & (uint32_t)(steps - 1);
}

uint32_t sg_bmsg_num_quantize(enum sg_bmsg_num kind, float value)
{
    double v = value;
    uint32_t u;

    switch (kind) {
    case SG_BMSG_U8:
        return (uint32_t)round_clamp(v, 0, 255);
    case SG_BMSG_S8:
        return (uint32_t)round_clamp(v, -128, 127) & 0xff;
    case SG_BMSG_U16:
        return (uint32_t)round_clamp(v, 0, 65535);
    case SG_BMSG_S16:
        return (uint32_t)round_clamp(v, -32768, 32767) & 0xffff;
    case SG_BMSG_S32:
        return (uint32_t)round_clamp(v, -2147483648.0, 2147483647.0);
    case SG_BMSG_FLOAT:
    case SG_BMSG_COORD_FLOAT:
    case SG_BMSG_ANGLE_FLOAT:
        memcpy(&u, &value, sizeof(u));
        return u;
    case SG_BMSG_COORD16:
        return (uint32_t)round_clamp(v * 8, -32768, 32767) & 0xffff;
    case SG_BMSG_COORD24: {
        /* whole part (floor) and the nearest 1/255 above it */
        int64_t whole, frac;

        if (isnan(v))
            return 0;
        if (v < -32768.0)
            v = -32768.0;
        if (v > 32767.0 + 254.0 / 255)
            v = 32767.0 + 254.0 / 255;
        whole = (int64_t)floor(v);
        frac = (int64_t)nearbyint((v - (double)whole) * 255);
        if (frac > 254 && whole < 32767) {
            whole++;
            frac = 0;
        } else if (frac > 254) {
            frac = 254;
        }
        return ((uint32_t)whole & 0xffff) | (uint32_t)frac << 16;
    }
    case SG_BMSG_COORD32:
        return (uint32_t)round_clamp(v * 16, -2147483648.0, 2147483647.0);
    case SG_BMSG_ANGLE8:
        return angle_steps(v, 256);
    case SG_BMSG_ANGLE16:
        return angle_steps(v, 65536);
    default:
        return 0;
    }
}

struct sg_bmsg_sizes sg_bmsg_sizes_nq(uint32_t prfl_flags)
{
    struct sg_bmsg_sizes s = SG_BMSG_SIZES_CLASSIC;

    if (prfl_flags & SG_BMSG_PRFL_FLOATCOORD)
        s.coord = SG_BMSG_COORD_FLOAT;
    else if (prfl_flags & SG_BMSG_PRFL_INT32COORD)
        s.coord = SG_BMSG_COORD32;
    else if (prfl_flags & SG_BMSG_PRFL_24BITCOORD)
        s.coord = SG_BMSG_COORD24;
    if (prfl_flags & SG_BMSG_PRFL_FLOATANGLE)
        s.angle = SG_BMSG_ANGLE_FLOAT;
    else if (prfl_flags & SG_BMSG_PRFL_SHORTANGLE)
        s.angle = SG_BMSG_ANGLE16;
    return s;
}

struct sg_bmsg_sizes sg_bmsg_sizes_qw(uint32_t fte_ext)
{
    struct sg_bmsg_sizes s = SG_BMSG_SIZES_CLASSIC;

    if (fte_ext & SG_BMSG_FTE_FLOATCOORDS) {
        s.coord = SG_BMSG_COORD_FLOAT;
        s.angle = SG_BMSG_ANGLE16;
    }
    return s;
}

/* ---- strings ---- */

size_t sg_bmsg_read_string(struct sg_bmsg_reader *r, char *out, size_t cap, unsigned flags,
                           enum sg_bmsg_str_end *end)
{
    const uint8_t *p = r->data + r->pos;
    size_t avail = r->end - r->pos, max, n;
    enum sg_bmsg_str_end how;

    if (r->overflowed && cap > 0) {
        /* a failed reader reads nothing more: the end, as for any read */
        out[0] = '\0';
        if (end)
            *end = SG_BMSG_STR_END;
        return 0;
    }
    if (cap == 0) {
        if (end)
            *end = SG_BMSG_STR_CUT;
        return 0;
    }
    max = cap - 1 < avail ? cap - 1 : avail;

    /* the common case first: a NUL within reach, no other stop byte */
    if (!(flags & (SG_BMSG_STR_STOP_FF | SG_BMSG_STR_STOP_NL))) {
        const uint8_t *z = max ? memchr(p, 0, max) : NULL;

        n = z ? (size_t)(z - p) : max;
    } else {
        for (n = 0; n < max; n++) {
            uint8_t c = p[n];

            if (c == 0 || (c == 0xff && (flags & SG_BMSG_STR_STOP_FF)) ||
                (c == '\n' && (flags & SG_BMSG_STR_STOP_NL)))
                break;
        }
    }
    if (n)
        memcpy(out, p, n);
    out[n] = '\0';
    r->pos += n;

    /* what stopped it */
    if (n < max) {
        how = p[n] == 0 ? SG_BMSG_STR_NUL : p[n] == 0xff ? SG_BMSG_STR_FF : SG_BMSG_STR_NL;
        r->pos++;
    } else if (n == cap - 1) {
        how = SG_BMSG_STR_CUT; /* also when the message ends right here: the game stops too */
    } else {
        how = SG_BMSG_STR_END;
        sg_bmsg_reader_fail(r);
    }
    if (end)
        *end = how;
    return n;
}

int sg_bmsg_write_string(struct sg_bmsg_writer *w, const void *s, size_t len,
                         enum sg_bmsg_str_end end)
{
    size_t term = end == SG_BMSG_STR_NUL || end == SG_BMSG_STR_FF || end == SG_BMSG_STR_NL;
    uint8_t *p;

    if (len > SIZE_MAX - term) {
        w->limit = w->len;
        w->overflowed = true;
        return SG_E_OVERFLOW;
    }
    p = sg_bmsg_room(w, len + term);
    if (!p)
        return SG_E_OVERFLOW;
    if (len)
        memcpy(p, s, len);
    if (term)
        p[len] = end == SG_BMSG_STR_NUL ? 0 : end == SG_BMSG_STR_FF ? 0xff : '\n';
    return 0;
}
