#pragma once
#include <vector>
// CPU reference results, compiled as plain C++.
std::vector<float> ref_saxpy(float a, float scale, const std::vector<float>& x, std::vector<float> y);
double ref_sum(const std::vector<float>& x);
std::vector<float> ref_square_plus(const std::vector<float>& x, float c);
