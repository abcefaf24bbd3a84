#include "reference.h"

#include <cstddef>

std::vector<float> ref_saxpy(float a, float scale, const std::vector<float>& x, std::vector<float> y) {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = a * scale * x[i] + y[i];
    return y;
}

double ref_sum(const std::vector<float>& x) {
    double s = 0;
    for (float v : x) s += v;
    return s;
}

std::vector<float> ref_square_plus(const std::vector<float>& x, float c) {
    std::vector<float> r(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = x[i] * x[i] + c;
    return r;
}
