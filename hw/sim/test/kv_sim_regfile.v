/*

pynq-kv: AXI4-Lite register file to test the Verilator harness (hw/sim/kv_sim.cpp)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * A small AXI4-Lite slave for tests/test_sim.py, independent of the engine.
 *
 * Word 0 reads ID (read only), words 1 .. REGS-1 are read/write with byte
 * strobes, word 0x3FE reads the number of completed writes, word 0x3FF never
 * answers (the bus hangs until reset: tests the harness timeout).  Any other
 * address, and writes to words 0 and 0x3FE, answer SLVERR and read 0.
 *
 * The address and write data channels are accepted independently (aw first,
 * then w a cycle later if both arrive together), and read data comes
 * READ_DELAY cycles after the address, so the harness sees non-trivial
 * handshakes.
 */
module kv_sim_regfile #
(
    // value of the read-only ID register (word 0)
    parameter [31:0] ID = 32'h5349_4D31,
    // read/write registers plus the ID register: 2 to 1022
    parameter REGS = 16,
    // cycles between the read address handshake and rvalid: 0 to 15
    parameter READ_DELAY = 2,
    // AXI4-Lite address width: 12 to 32
    parameter ADDR_WIDTH = 12
)
(
    input  wire                   clk,
    input  wire                   rst,

    input  wire [ADDR_WIDTH-1:0]  s_axil_awaddr,
    input  wire [2:0]             s_axil_awprot,
    input  wire                   s_axil_awvalid,
    output wire                   s_axil_awready,
    input  wire [31:0]            s_axil_wdata,
    input  wire [3:0]             s_axil_wstrb,
    input  wire                   s_axil_wvalid,
    output wire                   s_axil_wready,
    output wire [1:0]             s_axil_bresp,
    output wire                   s_axil_bvalid,
    input  wire                   s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]  s_axil_araddr,
    input  wire [2:0]             s_axil_arprot,
    input  wire                   s_axil_arvalid,
    output wire                   s_axil_arready,
    output wire [31:0]            s_axil_rdata,
    output wire [1:0]             s_axil_rresp,
    output wire                   s_axil_rvalid,
    input  wire                   s_axil_rready
);

initial begin
    if (REGS < 2 || REGS > 1022) begin
        $error("Error: REGS must be 2 to 1022 (instance %m)");
        $finish;
    end
    if (READ_DELAY < 0 || READ_DELAY > 15) begin
        $error("Error: READ_DELAY must be 0 to 15 (instance %m)");
        $finish;
    end
    if (ADDR_WIDTH < 12 || ADDR_WIDTH > 32) begin
        $error("Error: ADDR_WIDTH must be 12 to 32 (instance %m)");
        $finish;
    end
end

localparam [9:0] W_COUNT = 10'h3FE;
localparam [9:0] W_HANG = 10'h3FF;

reg [31:0] regs [1:REGS-1];
reg [31:0] write_count;

// write channel
reg        aw_have, w_have, bvalid_reg, awready_reg, wready_reg, w_hang;
reg [9:0]  aw_word;
reg [31:0] w_data;
reg [3:0]  w_strb;
reg [1:0]  bresp_reg;

assign s_axil_awready = awready_reg;
assign s_axil_wready = wready_reg;
assign s_axil_bvalid = bvalid_reg;
assign s_axil_bresp = bresp_reg;

integer i;

always @(posedge clk) begin
    awready_reg <= 1'b0;
    wready_reg <= 1'b0;
    if (bvalid_reg && s_axil_bready) begin
        bvalid_reg <= 1'b0;
    end
    // address first; data one cycle later at the earliest
    if (!aw_have && s_axil_awvalid && !awready_reg && !bvalid_reg && !w_hang) begin
        awready_reg <= 1'b1;
        aw_have <= 1'b1;
        aw_word <= s_axil_awaddr[11:2];
    end
    if (aw_have && !w_have && s_axil_wvalid && !wready_reg) begin
        wready_reg <= 1'b1;
        w_have <= 1'b1;
        w_data <= s_axil_wdata;
        w_strb <= s_axil_wstrb;
    end
    if (aw_have && w_have && !bvalid_reg) begin
        aw_have <= 1'b0;
        w_have <= 1'b0;
        if (aw_word == W_HANG) begin
            w_hang <= 1'b1;           // never answers
        end else begin
            bvalid_reg <= 1'b1;
            if (aw_word != 10'd0 && {22'd0, aw_word} < REGS) begin
                bresp_reg <= 2'b00;
                write_count <= write_count + 1;
                for (i = 0; i < 4; i = i + 1) begin
                    if (w_strb[i]) begin
                        regs[aw_word][8*i +: 8] <= w_data[8*i +: 8];
                    end
                end
            end else begin
                bresp_reg <= 2'b10;
            end
        end
    end
    if (rst) begin
        aw_have <= 1'b0;
        w_have <= 1'b0;
        w_hang <= 1'b0;
        bvalid_reg <= 1'b0;
        awready_reg <= 1'b0;
        wready_reg <= 1'b0;
        bresp_reg <= 2'b00;
        write_count <= 32'd0;
        for (i = 1; i < REGS; i = i + 1) begin
            regs[i] <= 32'd0;
        end
    end
end

// read channel
reg        arready_reg, rvalid_reg, r_busy, r_hang;
reg [9:0]  ar_word;
reg [3:0]  r_wait;
reg [31:0] rdata_reg;
reg [1:0]  rresp_reg;

assign s_axil_arready = arready_reg;
assign s_axil_rvalid = rvalid_reg;
assign s_axil_rdata = rdata_reg;
assign s_axil_rresp = rresp_reg;

always @(posedge clk) begin
    arready_reg <= 1'b0;
    if (rvalid_reg && s_axil_rready) begin
        rvalid_reg <= 1'b0;
    end
    if (!r_busy && !rvalid_reg && !r_hang && s_axil_arvalid && !arready_reg) begin
        arready_reg <= 1'b1;
        r_busy <= 1'b1;
        r_wait <= READ_DELAY[3:0];
        ar_word <= s_axil_araddr[11:2];
    end
    if (r_busy && !arready_reg) begin
        if (r_wait != 0) begin
            r_wait <= r_wait - 1'b1;
        end else begin
            r_busy <= 1'b0;
            if (ar_word == W_HANG) begin
                r_hang <= 1'b1;
            end else begin
                rvalid_reg <= 1'b1;
                rresp_reg <= 2'b00;
                if (ar_word == 10'd0) begin
                    rdata_reg <= ID;
                end else if (ar_word == W_COUNT) begin
                    rdata_reg <= write_count;
                end else if ({22'd0, ar_word} < REGS) begin
                    rdata_reg <= regs[ar_word];
                end else begin
                    rdata_reg <= 32'd0;
                    rresp_reg <= 2'b10;
                end
            end
        end
    end
    if (rst) begin
        arready_reg <= 1'b0;
        rvalid_reg <= 1'b0;
        r_busy <= 1'b0;
        r_hang <= 1'b0;
        r_wait <= 4'd0;
        rdata_reg <= 32'd0;
        rresp_reg <= 2'b00;
    end
end

wire unused = &{1'b0, s_axil_awprot, s_axil_arprot, s_axil_awaddr, s_axil_araddr};

endmodule

`resetall
