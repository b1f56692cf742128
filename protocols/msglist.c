/* The idTech 1/2 field and message lists: the field writer. */
#include "protocols/msglist.h"

void sg_fields_write(const struct sg_field *fields, uint32_t first, uint32_t n,
                     struct sg_bmsg_writer *w)
{
    for (uint32_t k = first; k < first + n; k++) {
        const struct sg_field *f = &fields[k];
        switch (f->type) {
        case SG_FIELD_NUM:
            sg_bmsg_write_num(w, f->num, f->raw);
            break;
        case SG_FIELD_STRING:
            sg_bmsg_write_string(w, f->ptr, f->len, f->end);
            break;
        case SG_FIELD_DATA:
            sg_bmsg_write_data(w, f->ptr, f->len);
            break;
        default:
            break; /* values: their bytes are in a DATA field */
        }
    }
}
